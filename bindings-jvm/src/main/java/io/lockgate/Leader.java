package io.lockgate;

import java.time.Duration;
import java.util.Objects;

/**
 * The leader of a {@link LeaderElection} as observed on the server at one moment.
 *
 * @param value what the leader published when it campaigned (e.g. its address)
 * @param term the fencing token of its leadership lease, larger for every later leader
 * @param remaining its remaining lease on the server when observed (renewed while it lives)
 */
public record Leader(String value, long term, Duration remaining) {
    /** Equal when value and term are (the remaining lease is only a snapshot). */
    @Override
    public boolean equals(Object o) {
        return o instanceof Leader x && term == x.term && value.equals(x.value);
    }

    @Override
    public int hashCode() {
        return Objects.hash(value, term);
    }
}
