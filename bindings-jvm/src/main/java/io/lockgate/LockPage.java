package io.lockgate;

import io.lockgate.internal.ffi.NativeEntry;
import io.lockgate.internal.ffi.NativePage;
import java.util.List;
import java.util.Optional;

/**
 * One page of {@link LockgateClient#listLocks(String, long, String)}: the locks found under the
 * prefix and the cursor of the next page (PROTOCOL.md §16). Racy by nature, like inspect.
 *
 * @param entries the locks someone holds or waits on, in the backend's order
 * @param cursor  where the next page starts; empty when this page is the last
 */
public record LockPage(List<Entry> entries, Optional<String> cursor) {

    /**
     * One listed lock.
     *
     * @param name    its name, as {@link LockgateClient#getLock(String)} takes it
     * @param kind    {@code mutex}, {@code rw}, {@code semaphore} or {@code election}
     * @param holders how many hold it (a semaphore's permits taken, the readers)
     * @param waiters how many wait in its queue
     * @param label   the first holder's label, if stored
     */
    public record Entry(String name, String kind, long holders, long waiters, Optional<String> label) {}

    static LockPage of(NativePage p) {
        List<Entry> entries = p.getEntries().stream().map(LockPage::entry).toList();
        return new LockPage(entries, Optional.ofNullable(p.getCursor()));
    }

    private static Entry entry(NativeEntry e) {
        return new Entry(e.getName(), e.getKind(), e.getHolders(), e.getWaiters(), Optional.ofNullable(e.getLabel()));
    }
}
