#!/usr/bin/perl
# Rewrites uniffi's generated Kotlin (0.32.2, pinned) so each thread reuses its call-status
# structs instead of allocating one per FFI call:   call-status-pool.pl GENERATED.kt
#
# Why: every uniffi call (a method's handle clone, a future's completion, a free) passes a
# `UniffiRustCallStatus`, a JNA `Structure`; allocating one mallocs two `Memory` blocks, and JNA
# files each in a global map keyed by address and registers it with its Cleaner. Measured here
# (`Lease.isHeld()`, two calls): 11-18 µs with a fresh status, 1.5 µs with a reused one; an
# acquire+close pair makes about ten such calls.
#
# Why it is safe: a status is written (code 0, empty error buffer) before every call and read
# only by the call that took it; each thread has its own pool, and a nested call on the same
# thread (an error's lift frees its buffer through another call) takes another status from it.
# Fails the build when uniffi's template no longer has the expected text, so a uniffi upgrade
# cannot silently drop this.
use strict;
use warnings;

my $file = shift or die "usage: call-status-pool.pl GENERATED.kt\n";
open my $in, '<', $file or die "call-status-pool.pl: $file: $!\n";
my $text = do { local $/; <$in> };
close $in;

my $old = <<'KT';
    var status = UniffiRustCallStatus()
    val return_value = callback(status)
    uniffiCheckCallStatus(errorHandler, status)
    return return_value
}
KT

my $new = <<'KT';
    val pool = uniffiCallStatusPool.get()
    val status = pool.pollLast() ?: UniffiRustCallStatus()
    status.code = UNIFFI_CALL_SUCCESS
    status.error_buf.capacity = 0
    status.error_buf.len = 0
    status.error_buf.data = null
    try {
        val return_value = callback(status)
        uniffiCheckCallStatus(errorHandler, status)
        return return_value
    } finally {
        pool.addLast(status)
    }
}

/** Each thread's idle call statuses (scripts/call-status-pool.pl says why). */
internal val uniffiCallStatusPool: ThreadLocal<java.util.ArrayDeque<UniffiRustCallStatus>> =
    ThreadLocal.withInitial { java.util.ArrayDeque<UniffiRustCallStatus>() }
KT

my $count = () = $text =~ /\Q$old\E/g;
$count == 1 or die "call-status-pool.pl: expected uniffi's call helper once in $file, found it $count times (uniffi changed?)\n";
$text =~ s/\Q$old\E/$new/;

open my $out, '>', $file or die "call-status-pool.pl: $file: $!\n";
print $out $text;
close $out or die "call-status-pool.pl: $file: $!\n";
