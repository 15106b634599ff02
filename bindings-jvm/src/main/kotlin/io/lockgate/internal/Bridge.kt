package io.lockgate.internal

import io.lockgate.internal.ffi.ClientSlot
import io.lockgate.internal.ffi.NativeClient
import io.lockgate.internal.ffi.NativeElection
import io.lockgate.internal.ffi.NativeLeader
import io.lockgate.internal.ffi.NativeLease
import io.lockgate.internal.ffi.NativeLock
import io.lockgate.internal.ffi.NativeLockOptions
import io.lockgate.internal.ffi.NativeOptionValue
import io.lockgate.internal.ffi.NativePage
import io.lockgate.internal.ffi.NativeSnapshot
import io.lockgate.internal.ffi.NativeWait
import io.lockgate.internal.ffi.NativeBroken
import com.sun.jna.CallbackThreadInitializer
import com.sun.jna.Native
import java.util.concurrent.CompletableFuture
import java.util.function.Function
import java.util.concurrent.LinkedBlockingQueue
import kotlin.coroutines.CoroutineContext
import kotlinx.coroutines.CoroutineDispatcher
import kotlinx.coroutines.CoroutineName
import kotlinx.coroutines.CoroutineScope
import kotlinx.coroutines.CoroutineStart
import kotlinx.coroutines.Dispatchers
import kotlinx.coroutines.ExperimentalCoroutinesApi
import kotlinx.coroutines.SupervisorJob
import kotlinx.coroutines.async
import kotlinx.coroutines.launch

/**
 * The one async bridge of the JVM binding: uniffi's `suspend` functions as [Op]s that Java runs
 * as [CompletableFuture]s or on the calling thread. Not public API (`io.lockgate.internal`).
 *
 * - Cancelling a future cancels the coroutine; uniffi frees the Rust future, which withdraws
 *   the wait on the server. A result that owns something (a client, a lease) and arrives after
 *   its future was cancelled is disposed of, so a late grant is released rather than leaked.
 * - Errors pass through unchanged; `io.lockgate.Errors` maps them, in one place.
 * - A blocking call runs the coroutine on the calling thread: the native wake-up resumes it
 *   there (one thread hop fewer), and an interrupt cancels it and finishes the cleanup first.
 */
object Bridge {
    private val scope = CoroutineScope(SupervisorJob() + Dispatchers.Default + CoroutineName("lockgate"))

    init {
        // Rust wakes a suspended call from its runtime threads through this JNA callback, and
        // hands them telemetry events and lease signals through the others. By default JNA
        // attaches such a thread to the JVM and detaches it after every call, which costs more
        // than the lock round trip itself; keep the runtime's threads attached.
        // The telemetry relay's thread is named apart, so a thread dump (or a profiler) tells
        // logging and metrics work from lock work.
        val attached = CallbackThreadInitializer(true, false, "lockgate-io")
        val relay = CallbackThreadInitializer(true, false, "lockgate-telemetry")
        for ((callback, thread) in listOf<Pair<com.sun.jna.Callback, CallbackThreadInitializer>>(
            io.lockgate.internal.ffi.uniffiRustFutureContinuationCallbackImpl to attached,
            io.lockgate.internal.ffi.uniffiCallbackInterfaceTelemetrySink.`recordBatch` to relay,
            io.lockgate.internal.ffi.uniffiCallbackInterfaceTelemetrySink.`debugEnabled` to relay,
            io.lockgate.internal.ffi.uniffiCallbackInterfaceLeaseListener.`atRisk` to attached,
            io.lockgate.internal.ffi.uniffiCallbackInterfaceLeaseListener.`ended` to attached,
        )) {
            Native.setCallbackThreadInitializer(callback, thread)
        }
        // At JVM exit (normally, System.exit, SIGINT, SIGTERM, SIGHUP) the core closes every
        // client not closed yet (leases released, waits withdrawn) within its one exit grace.
        try {
            Runtime.getRuntime().addShutdownHook(
                Thread({ io.lockgate.internal.ffi.closeOpenClients() }, "lockgate-exit-cleanup"))
        } catch (alreadyExiting: IllegalStateException) {
            // first used while the JVM shuts down: nothing can run at exit any more
        }
    }

    /** Runs resumptions on the thread that waits in [Op.block]. */
    private class CallerThread : CoroutineDispatcher() {
        val queue = LinkedBlockingQueue<Runnable>()

        override fun dispatch(context: CoroutineContext, block: Runnable) {
            queue.put(block)
        }
    }

    /** One native call, not started yet. A result nobody will take (cancelled meanwhile) goes to [orphan]. */
    class Op<T> internal constructor(private val orphan: (T) -> Unit, private val body: suspend () -> T) {
        /**
         * Starts the call on the caller's thread (UNDISPATCHED; completion resumes on Default): its
         * result through [map], errors through [mapError]. A result that does not make it into
         * the future (cancelled meanwhile, or [map] failed) goes to the orphan handler.
         */
        fun <R> async(map: Function<T, R>, mapError: Function<Throwable, Throwable>): CompletableFuture<R> {
            val future = CompletableFuture<R>()
            val job = scope.launch(start = CoroutineStart.UNDISPATCHED) {
                val value = try {
                    body()
                } catch (e: Throwable) {
                    future.completeExceptionally(mapError.apply(e))
                    return@launch
                }
                val done = try {
                    future.complete(map.apply(value))
                } catch (e: Throwable) {
                    future.completeExceptionally(mapError.apply(e))
                    false
                }
                if (!done) orphan(value)
            }
            future.whenComplete { _, _ -> if (future.isCancelled) job.cancel() }
            return future
        }

        /**
         * Runs the call to completion on the calling thread. With [interruptible], an interrupt
         * cancels it, waits until the cancellation has run (the wait is withdrawn), hands a result
         * that arrived anyway to [orphan] and throws; otherwise interrupts are re-asserted at the end.
         */
        @OptIn(ExperimentalCoroutinesApi::class)
        @Throws(InterruptedException::class)
        fun block(interruptible: Boolean): T {
            val caller = CallerThread()
            val deferred = scope.async(caller, start = CoroutineStart.UNDISPATCHED) { body() }
            var interrupted = false
            while (!deferred.isCompleted) {
                val next = try {
                    caller.queue.take()
                } catch (e: InterruptedException) {
                    interrupted = true
                    if (interruptible) deferred.cancel()
                    continue
                }
                next.run()
            }
            if (interrupted && interruptible) {
                if (!deferred.isCancelled) {
                    runCatching { deferred.getCompleted() }.onSuccess(orphan)
                }
                throw InterruptedException()
            }
            if (interrupted) Thread.currentThread().interrupt()
            return deferred.getCompleted()
        }
    }

    /** A granted lease and its fencing token (`0`: the backend gives none, e.g. Redlock). */
    class Grant(@JvmField val lease: NativeLease, @JvmField val fencingToken: Long)

    /**
     * Acquires into a fresh lease; the answer is the fencing token, `0` for a grant without one,
     * negative if not granted (`null` here). Whatever does not end up returned is freed.
     */
    private inline fun grant(body: (NativeLease) -> Long): Grant? {
        val lease = NativeLease()
        var token = -1L
        try {
            token = body(lease)
        } finally {
            // Not acquired, failed or cancelled: free it (a grant that landed anyway is released).
            if (token < 0L) lease.destroy()
        }
        return if (token < 0L) null else Grant(lease, token)
    }

    private fun leaseOp(body: suspend (NativeLease) -> Long): Op<Grant?> = Op({ it?.lease?.destroy() }) { grant { body(it) } }

    private fun <T> op(body: suspend () -> T): Op<T> = Op({}, body)

    /**
     * The owner of an acquisition: the calling thread (for an async one, the thread that started
     * it). The core refuses a thread waiting for its own lease; other threads wait their turn.
     */
    @Suppress("DEPRECATION") // Thread.threadId() is JDK 19+; getId() is the same id
    private fun caller(): ULong = Thread.currentThread().id.toULong()

    /** Whether every client's telemetry events cross with their metric updates (Micrometer bound). */
    @JvmStatic
    fun metricsWanted(on: Boolean) = io.lockgate.internal.ffi.setMetricsWanted(on)

    /** What metric series [id] is (an update names its series by number), or `null`. */
    @JvmStatic
    fun metricSeries(id: Int): io.lockgate.internal.ffi.MetricSeries? = io.lockgate.internal.ffi.metricSeries(id)

    /** What every telemetry event of shape [id] has in common (an event names it by number), or `null`. */
    @JvmStatic
    fun telemetryShape(id: Int): io.lockgate.internal.ffi.TelemetryShape? = io.lockgate.internal.ffi.telemetryShape(id)

    /** Waits up to [timeoutSecs] (`null`: the lock's default wait) as the calling thread. */
    @JvmStatic
    fun acquire(lock: NativeLock, timeoutSecs: Double?): Op<Grant?> = caller().let { owner ->
        leaseOp { into ->
            val wait = start(lock, timeoutSecs, owner, into)
            try {
                wait.finish()
            } finally {
                wait.destroy()
            }
        }
    }

    /**
     * Waits with the lock's default timeout as the calling thread, as [acquireInterruptibly]
     * does, but obeying no interrupt (re-asserted afterwards): `Lock.lock()`.
     */
    @JvmStatic
    fun acquireBlocking(lock: NativeLock): Grant? = acquireInPlace(lock, null, false)

    /**
     * Waits up to [timeoutSecs] (`null`: the lock's default) as the calling thread, which blocks:
     * first in place, in one native call ([IN_PLACE_SECS] at most; no continuation crosses back
     * into Java, and an uncontended grant ends there), then, if still waiting, parked until the
     * native side wakes it (so a long wait never holds a virtual thread's carrier). An interrupt
     * withdraws the wait and throws, a grant that arrived anyway released, as in [Op.block].
     */
    @JvmStatic
    @Throws(InterruptedException::class)
    fun acquireInterruptibly(lock: NativeLock, timeoutSecs: Double?): Grant? = acquireInPlace(lock, timeoutSecs, true)

    private fun acquireInPlace(lock: NativeLock, timeoutSecs: Double?, interruptible: Boolean): Grant? {
        if (interruptible && Thread.interrupted()) throw InterruptedException()
        val owner = caller()
        return grant { into ->
            val wait = start(lock, timeoutSecs, owner, into)
            try {
                val answer = wait.wait(IN_PLACE_SECS)
                if (interruptible && Thread.interrupted()) {
                    wait.cancel()
                    throw InterruptedException()
                }
                if (answer != STILL_WAITING) answer else Op<Long>({}) { wait.finish() }.block(interruptible)
            } finally {
                wait.destroy()
            }
        }
    }

    /** An acquisition into [into], not started yet: up to [timeoutSecs], `null` the lock's default. */
    private fun start(lock: NativeLock, timeoutSecs: Double?, owner: ULong, into: NativeLease): NativeWait =
        if (timeoutSecs == null) lock.startAcquireDefault(owner, into) else lock.startAcquire(timeoutSecs, owner, into)

    /** How long an acquisition waits in place before it parks (an interrupt is noticed after it). */
    private const val IN_PLACE_SECS = 0.05

    /** `NativeWait.wait`'s answer while the acquisition still waits (lib.rs `STILL_WAITING`). */
    private const val STILL_WAITING = -2L

    /** One attempt as the calling thread. */
    @JvmStatic
    fun tryAcquire(lock: NativeLock): Op<Grant?> = caller().let { owner -> leaseOp { lock.tryAcquire(owner, it) } }

    @JvmStatic
    fun campaign(election: NativeElection, value: String, timeoutSecs: Double?): Op<Grant?> =
        leaseOp { election.campaign(value, timeoutSecs, it) }

    @JvmStatic
    fun observe(election: NativeElection): Op<NativeLeader?> = op { election.observe() }

    @JvmStatic
    fun inspect(lock: NativeLock): Op<NativeSnapshot> = op { lock.inspect() }

    @JvmStatic
    fun inspect(election: NativeElection): Op<NativeSnapshot> = op { election.inspect() }

    @JvmStatic
    fun inspect(client: NativeClient, name: String, kind: String): Op<NativeSnapshot> = op { client.inspect(name, kind) }

    @JvmStatic
    fun breakLock(client: NativeClient, name: String, kind: String, token: Long?): Op<NativeBroken?> =
        op { client.breakLock(name, kind, token) }

    /** One page of the locks under [prefix] (see `LockgateClient.listLocks`). */
    @JvmStatic
    fun listLocks(client: NativeClient, prefix: String, limit: Long?, cursor: String?): Op<NativePage> =
        op { client.listLocks(prefix, limit, cursor) }

    @JvmStatic
    fun extend(lease: NativeLease, durationSecs: Double): Op<Void?> = op { lease.extend(durationSecs); null }

    /** Adopts the lease [identity] names (another client's `Lease.identity()`) into a fresh lease. */
    @JvmStatic
    fun adopt(client: NativeClient, identity: String, options: NativeLockOptions): Op<Grant?> =
        leaseOp { client.adopt(identity, options, it) }

    /** The identity of [lease], for another client to adopt. */
    @JvmStatic
    fun identity(lease: NativeLease): Op<String> = op { lease.identity() }

    @JvmStatic
    fun release(lease: NativeLease): Op<Boolean> = op { lease.release() }

    /** Connects into a slot and takes the client out; the slot is freed either way. */
    @JvmStatic
    fun connect(url: String, options: Map<String, NativeOptionValue>): Op<NativeClient?> =
        Op({ it?.destroy() }) {
            val slot = ClientSlot()
            try {
                io.lockgate.internal.ffi.connect(url, options, slot)
                slot.take()
            } finally {
                slot.destroy()
            }
        }

    @JvmStatic
    fun shutdown(client: NativeClient): Op<Void?> = op { client.shutdown(); null }

    /** Panics inside the native library, synchronously (tests prove the JVM survives). */
    @JvmStatic
    fun debugPanic(message: String) = io.lockgate.internal.ffi.debugPanic(message)

    /** Panics inside a native runtime task. */
    @JvmStatic
    fun debugPanicAsync(message: String): Op<Void?> = op { io.lockgate.internal.ffi.debugPanicAsync(message); null }
}
