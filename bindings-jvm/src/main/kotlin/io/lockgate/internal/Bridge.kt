package io.lockgate.internal

import io.lockgate.internal.ffi.ClientSlot
import io.lockgate.internal.ffi.Disposable
import io.lockgate.internal.ffi.Failure
import io.lockgate.internal.ffi.LossWatch
import io.lockgate.internal.ffi.NativeClient
import io.lockgate.internal.ffi.NativeClientOptions
import io.lockgate.internal.ffi.NativeElection
import io.lockgate.internal.ffi.NativeLeader
import io.lockgate.internal.ffi.NativeLease
import io.lockgate.internal.ffi.NativeLock
import io.lockgate.internal.ffi.NativeRedlock
import io.lockgate.internal.ffi.NativeRedlockLock
import io.lockgate.internal.ffi.NativeRedlockOptions
import io.lockgate.internal.ffi.RedlockSlot
import com.sun.jna.CallbackThreadInitializer
import com.sun.jna.Native
import java.util.concurrent.CompletableFuture
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
 * The one async bridge of the JVM binding: uniffi's `suspend` functions as [CompletableFuture]s
 * that Java can use. Not public API (`io.lockgate.internal`).
 *
 * - Cancelling a returned future cancels the coroutine; uniffi then frees the Rust future, which
 *   aborts the native task and so cancels the wait on the server.
 * - A result that owns something (a client, a lease) and arrives after its future was cancelled
 *   is disposed of here, so a late grant is released at once rather than leaked.
 * - Errors pass through unchanged (`NativeException`, `InternalException` for a caught panic);
 *   `io.lockgate.Errors` maps them, in one place.
 * - Blocking calls ([blocking]) run the coroutine on the calling thread itself: the native
 *   wake-up resumes it there directly, one thread hop fewer than a future completed from a
 *   pool, and an interrupt cancels it and finishes the cleanup before the call returns.
 */
object Bridge {
    private val scope = CoroutineScope(SupervisorJob() + Dispatchers.Default + CoroutineName("lockgate"))

    init {
        // Rust wakes a suspended call from its runtime threads through this JNA callback. By
        // default JNA attaches such a thread to the JVM and detaches it after every call, which
        // costs more than the lock round trip itself; keep the runtime's threads attached.
        Native.setCallbackThreadInitializer(
            io.lockgate.internal.ffi.uniffiRustFutureContinuationCallbackImpl,
            CallbackThreadInitializer(true, false, "lockgate-io"),
        )
    }

    private fun <T> call(orphan: (T) -> Unit, block: suspend () -> T): CompletableFuture<T> {
        val future = CompletableFuture<T>()
        // UNDISPATCHED: the caller's thread starts the native call; completion resumes on Default.
        val job = scope.launch(start = CoroutineStart.UNDISPATCHED) {
            val value = try {
                block()
            } catch (e: Throwable) {
                future.completeExceptionally(e)
                return@launch
            }
            if (!future.complete(value)) orphan(value)
        }
        future.whenComplete { _, _ -> if (future.isCancelled) job.cancel() }
        return future
    }

    /** Runs resumptions on the thread that waits in [blocking]. */
    private class CallerThread : CoroutineDispatcher() {
        val queue = LinkedBlockingQueue<Runnable>()

        override fun dispatch(context: CoroutineContext, block: Runnable) {
            queue.put(block)
        }
    }

    /**
     * Runs [block] to completion on the calling thread. With [interruptible], an interrupt
     * cancels it, waits until the cancellation has run (the native future is freed, so the wait
     * is withdrawn), hands a result that arrived anyway to [orphan], and throws
     * [InterruptedException]. Otherwise interrupts are remembered and re-asserted at the end.
     */
    @OptIn(ExperimentalCoroutinesApi::class)
    @Throws(InterruptedException::class)
    private fun <T> blocking(interruptible: Boolean, orphan: (T) -> Unit, block: suspend () -> T): T {
        val caller = CallerThread()
        val deferred = scope.async(caller, start = CoroutineStart.UNDISPATCHED) { block() }
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

    /** A granted lease and its fencing token. */
    class Grant(@JvmField val lease: NativeLease, @JvmField val fencingToken: Long)

    /**
     * Acquires into a fresh lease; [granted] turns the lease and the answer into the result
     * (`null`: not acquired). Whatever does not end up returned is freed.
     */
    private suspend fun <A, R> acquireInto(body: suspend (NativeLease) -> A, granted: (NativeLease, A) -> R?): R? {
        val lease = NativeLease()
        var result: R? = null
        try {
            result = granted(lease, body(lease))
        } finally {
            // Not acquired, failed or cancelled: free it (a grant that landed anyway is released).
            if (result == null) lease.destroy()
        }
        return result
    }

    /** A lock's acquisition answers the fencing token (`0`: not acquired). */
    private suspend fun grant(body: suspend (NativeLease) -> Long): Grant? =
        acquireInto(body) { lease, token -> if (token == 0L) null else Grant(lease, token) }

    private val dropGrant: (Grant?) -> Unit = { it?.lease?.destroy() }

    private fun leaseCall(body: suspend (NativeLease) -> Long): CompletableFuture<Grant?> =
        call(dropGrant) { grant(body) }

    private fun leaseBlocking(interruptible: Boolean, body: suspend (NativeLease) -> Long): Grant? =
        blocking(interruptible, dropGrant) { grant(body) }

    @JvmStatic
    @Throws(InterruptedException::class)
    fun acquireBlocking(lock: NativeLock, timeoutSecs: Double, interruptible: Boolean): Grant? =
        leaseBlocking(interruptible) { lease -> lock.acquire(timeoutSecs, lease) }

    @JvmStatic
    @Throws(InterruptedException::class)
    fun acquireDefaultBlocking(lock: NativeLock, interruptible: Boolean): Grant? =
        leaseBlocking(interruptible) { lease -> lock.acquireDefault(lease) }

    @JvmStatic
    fun tryAcquireBlocking(lock: NativeLock): Grant? =
        leaseBlocking(false) { lease -> lock.tryAcquire(lease) }

    @JvmStatic
    @Throws(InterruptedException::class)
    fun campaignBlocking(election: NativeElection, value: String, timeoutSecs: Double?, interruptible: Boolean): Grant? =
        leaseBlocking(interruptible) { lease -> election.campaign(value, timeoutSecs, lease) }

    @JvmStatic
    fun observeBlocking(election: NativeElection): NativeLeader? =
        blocking(false, {}) { election.observe() }

    @JvmStatic
    fun extendBlocking(lease: NativeLease, durationSecs: Double) =
        blocking(false, {}) { lease.extend(durationSecs) }

    @JvmStatic
    fun releaseBlocking(lease: NativeLease): Boolean =
        blocking(false, {}) { lease.release() }

    @JvmStatic
    fun connectBlocking(url: String, options: NativeClientOptions): NativeClient? =
        blocking(false, { it?.destroy() }) { connectBody(url, options) }

    @JvmStatic
    fun shutdownBlocking(client: NativeClient) =
        blocking(false, {}) { client.shutdown() }

    /** Connects into [slot] and takes the result out; the slot is freed either way. */
    private suspend fun <S : Disposable, T> viaSlot(slot: S, connect: suspend (S) -> Unit, take: (S) -> T?): T? {
        try {
            connect(slot)
            return take(slot)
        } finally {
            slot.destroy()
        }
    }

    private suspend fun connectBody(url: String, options: NativeClientOptions): NativeClient? =
        viaSlot(ClientSlot(), { io.lockgate.internal.ffi.connect(url, options, it) }, ClientSlot::take)

    @JvmStatic
    fun connect(url: String, options: NativeClientOptions): CompletableFuture<NativeClient?> =
        call({ it?.destroy() }) { connectBody(url, options) }

    @JvmStatic
    fun shutdown(client: NativeClient): CompletableFuture<Void?> =
        call({}) { client.shutdown(); null }

    @JvmStatic
    fun acquire(lock: NativeLock, timeoutSecs: Double): CompletableFuture<Grant?> =
        leaseCall { lease -> lock.acquire(timeoutSecs, lease) }

    @JvmStatic
    fun acquireDefault(lock: NativeLock): CompletableFuture<Grant?> =
        leaseCall { lease -> lock.acquireDefault(lease) }

    @JvmStatic
    fun tryAcquire(lock: NativeLock): CompletableFuture<Grant?> =
        leaseCall { lease -> lock.tryAcquire(lease) }

    @JvmStatic
    fun campaign(election: NativeElection, value: String, timeoutSecs: Double?): CompletableFuture<Grant?> =
        leaseCall { lease -> election.campaign(value, timeoutSecs, lease) }

    @JvmStatic
    fun observe(election: NativeElection): CompletableFuture<NativeLeader?> =
        call({}) { election.observe() }

    @JvmStatic
    fun extend(lease: NativeLease, durationSecs: Double): CompletableFuture<Void?> =
        call({}) { lease.extend(durationSecs); null }

    @JvmStatic
    fun release(lease: NativeLease): CompletableFuture<Boolean> =
        call({}) { lease.release() }

    /** Completes with the loss reason, or `null` once the lease ended normally. */
    @JvmStatic
    fun lossOutcome(watch: LossWatch): CompletableFuture<Failure?> =
        call({}) {
            try {
                watch.outcome()
            } finally {
                watch.destroy()
            }
        }

    // ------------------------------------------------------------------------- Redlock
    // The same shapes as above, and the same NativeLease (extend, release and loss watch are
    // the functions above); a Redlock grant has no fencing token, so the lease itself is the
    // result (null: not acquired).

    /** A Redlock acquisition answers whether it was granted. */
    private suspend fun redlockGrant(body: suspend (NativeLease) -> Boolean): NativeLease? =
        acquireInto(body) { lease, granted -> if (granted) lease else null }

    private val dropLease: (NativeLease?) -> Unit = { it?.destroy() }

    @JvmStatic
    @Throws(InterruptedException::class)
    fun redlockAcquireBlocking(lock: NativeRedlockLock, timeoutSecs: Double, interruptible: Boolean): NativeLease? =
        blocking(interruptible, dropLease) { redlockGrant { lease -> lock.acquire(timeoutSecs, lease) } }

    @JvmStatic
    @Throws(InterruptedException::class)
    fun redlockAcquireDefaultBlocking(lock: NativeRedlockLock, interruptible: Boolean): NativeLease? =
        blocking(interruptible, dropLease) { redlockGrant { lease -> lock.acquireDefault(lease) } }

    @JvmStatic
    fun redlockTryAcquireBlocking(lock: NativeRedlockLock): NativeLease? =
        blocking(false, dropLease) { redlockGrant { lease -> lock.tryAcquire(lease) } }

    @JvmStatic
    fun redlockAcquire(lock: NativeRedlockLock, timeoutSecs: Double): CompletableFuture<NativeLease?> =
        call(dropLease) { redlockGrant { lease -> lock.acquire(timeoutSecs, lease) } }

    @JvmStatic
    fun redlockAcquireDefault(lock: NativeRedlockLock): CompletableFuture<NativeLease?> =
        call(dropLease) { redlockGrant { lease -> lock.acquireDefault(lease) } }

    @JvmStatic
    fun redlockTryAcquire(lock: NativeRedlockLock): CompletableFuture<NativeLease?> =
        call(dropLease) { redlockGrant { lease -> lock.tryAcquire(lease) } }

    private suspend fun redlockConnectBody(urls: List<String>, options: NativeRedlockOptions): NativeRedlock? =
        viaSlot(RedlockSlot(), { io.lockgate.internal.ffi.redlockConnect(urls, options, it) }, RedlockSlot::take)

    @JvmStatic
    fun redlockConnectBlocking(urls: List<String>, options: NativeRedlockOptions): NativeRedlock? =
        blocking(false, { it?.destroy() }) { redlockConnectBody(urls, options) }

    @JvmStatic
    fun redlockConnect(urls: List<String>, options: NativeRedlockOptions): CompletableFuture<NativeRedlock?> =
        call({ it?.destroy() }) { redlockConnectBody(urls, options) }

    @JvmStatic
    fun redlockShutdownBlocking(redlock: NativeRedlock) =
        blocking(false, {}) { redlock.shutdown() }

    @JvmStatic
    fun redlockShutdown(redlock: NativeRedlock): CompletableFuture<Void?> =
        call({}) { redlock.shutdown(); null }

    /** Panics inside the native library, synchronously (tests prove the JVM survives). */
    @JvmStatic
    fun debugPanic(message: String) = io.lockgate.internal.ffi.debugPanic(message)

    @JvmStatic
    fun debugPanicBlocking(message: String) =
        blocking(false, {}) { io.lockgate.internal.ffi.debugPanicAsync(message) }

    @JvmStatic
    fun debugPanicAsync(message: String): CompletableFuture<Void?> =
        call({}) { io.lockgate.internal.ffi.debugPanicAsync(message); null }
}
