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
# And it synchronises a status by hand (JNA's automatic write before and read after each call
# go field by field through reflection: the largest Java-side cost of a call in a profile):
# only the code byte (offset 0) is written before the call and read after it; the whole status
# is read only when the call failed, and then the error buffer is the one Rust just wrote (it
# writes both on failure and neither on success).
#
# Why it is safe: a status is reset (code 0) before every call and read only by the call that
# took it; each thread has its own pool, and a nested call on the same thread (an error's lift
# frees its buffer through another call) takes another status from it.
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
    val status = pool.pollLast() ?: UniffiRustCallStatus().also { it.setAutoSynch(false) }
    val memory = status.getPointer()
    memory.setByte(0, UNIFFI_CALL_SUCCESS)
    try {
        val return_value = callback(status)
        if (memory.getByte(0) != UNIFFI_CALL_SUCCESS) {
            status.read()
            uniffiCheckCallStatus(errorHandler, status)
        }
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
