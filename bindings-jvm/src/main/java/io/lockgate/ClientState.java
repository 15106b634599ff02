package io.lockgate;

/**
 * What the Java side keeps per client beside the native client: the {@code Lock} interface's
 * per-thread holds ({@link ThreadHolds}) and the leases kept reachable until released
 * ({@link OpenLeases}). Shared by every lock object made from the client.
 */
final class ClientState {
    final ThreadHolds threadHolds = new ThreadHolds();
    final OpenLeases openLeases = new OpenLeases();
}
