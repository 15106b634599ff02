package io.lockgate;

import java.time.Duration;
import java.util.Objects;

/**
 * The leader of a {@link LeaderElection} as observed on the server at one moment: the value it
 * published when it campaigned, its term, and how long its lease had left.
 */
public final class Leader {
    private final String value;
    private final long term;
    private final Duration remaining;

    Leader(String value, long term, Duration remaining) {
        this.value = value;
        this.term = term;
        this.remaining = remaining;
    }

    /** What the leader published (e.g. its address). */
    public String value() {
        return value;
    }

    /**
     * The leader's term: the fencing token of its leadership lease, larger for every later
     * leader of this election.
     */
    public long term() {
        return term;
    }

    /** The leader's remaining lease on the server when observed (renewed while it lives). */
    public Duration remaining() {
        return remaining;
    }

    /** Equal when value and term are (the remaining lease is only a snapshot). */
    @Override
    public boolean equals(Object o) {
        if (!(o instanceof Leader)) {
            return false;
        }
        Leader x = (Leader) o;
        return term == x.term && value.equals(x.value);
    }

    @Override
    public int hashCode() {
        return Objects.hash(value, term);
    }

    @Override
    public String toString() {
        return "Leader{value='" + value + "', term=" + term + ", remaining=" + remaining + "}";
    }
}
