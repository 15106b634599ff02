package io.lockgate;

import io.lockgate.internal.ffi.NativeBroken;
import java.util.Optional;
import java.util.OptionalLong;

/**
 * What {@link LockgateClient#breakLock(String)} removed: the broken holder's label and its
 * grant's fencing token (empty where the entry or the backend records none: a peer's entry has
 * no label, Redlock and memcached issue no tokens).
 *
 * @param label        the label the broken holder's client stored, if any
 * @param fencingToken the broken grant's fencing token, where the backend issues them
 */
public record BrokenHolder(Optional<String> label, OptionalLong fencingToken) {

    static BrokenHolder of(NativeBroken b) {
        Long t = b.getFencingToken();
        return new BrokenHolder(Optional.ofNullable(b.getLabel()), t == null ? OptionalLong.empty() : OptionalLong.of(t));
    }
}
