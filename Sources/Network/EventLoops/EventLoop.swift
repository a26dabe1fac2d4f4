import CSystem
import CUV
import Dispatch
import Glibc
import MonotonicTime
import Synchronization

/// One libuv loop (`uv_loop_t`) running on a thread of its own, started by `init` and ended by ``stop()``.
///
/// Threading: ``execute(_:)``, ``submit(_:)``, ``performAndWait(_:)``, ``isCurrent`` and ``stop()`` may be
/// called from any thread. Everything else in this module (timers, listeners, connections, signal
/// watchers, ``now``, ``enqueue(_:)``) belongs to one loop and is used only on that loop's thread: create
/// such objects inside work the loop runs, and they call you back on that thread.
///
/// Ownership: the thread holds the loop (retained) until it ends, so a running loop is never freed;
/// ``stop()`` closes every handle still open on it (their owners hear `didClose`), runs the close
/// callbacks, closes the `uv_loop_t` and joins the thread.
public final class EventLoop: @unchecked Sendable {
    // @unchecked: `localWork`, the spares, `idleActive`, `wakeUps`, `openHandles` and `shuttingDown` are touched only on the loop's
    // thread; the inbox is behind a Mutex, the thread identity is Atomic, and the uv pointers never change.
    /// The thread's name, as `top -H` shows it (at most 15 bytes are kept).
    public let name: String
    let raw: UnsafeMutablePointer<uv_loop_t>
    /// Wakes the loop for work from other threads; the only libuv call made off the loop (`uv_async_send`).
    private let wakeUp: UnsafeMutablePointer<uv_async_t>
    /// Active only while `localWork` is not empty: makes the loop run that work on its next turn.
    private let idle: UnsafeMutablePointer<uv_idle_t>
    private let onThreadExit: (@Sendable () -> Void)?
    /// The buffer every connection of this loop reads into (libuv reads one connection at a time).
    let readBuffer: UnsafeMutableRawBufferPointer

    private struct Inbox {
        var work: [@Sendable () -> Void] = []
        var stopping = false
        /// The loop has run its last work: later work is dropped and the async handle may be gone.
        var exited = false
    }
    private let inbox = Mutex(Inbox())
    /// `uv_loop_close` succeeded: every handle was closed, and libuv closed its own descriptors (the epoll
    /// set, the async wake-up, the signal pipe). For tests.
    let closedCleanly = Atomic<Bool>(false)
    /// `pthread_self()` of the loop thread while it runs, 0 otherwise.
    private let threadID = Atomic<UInt>(0)
    private let thread = Mutex<pthread_t?>(nil)
    private let finished = DispatchSemaphore(value: 0)

    // Loop-thread state.
    private var localWork: [() -> Void] = []
    private var spareLocalWork: [() -> Void] = []
    private var spareWork: [@Sendable () -> Void] = []
    /// How many times other threads' work woke the loop (for tests of coalescing).
    private(set) var wakeUps = 0
    private var idleActive = false
    private var shuttingDown = false
    /// Handles opened by this module's types and not yet closed (their close callback not yet run).
    var openHandles = 0

    /// Creates a loop and starts its thread.
    ///
    /// - Parameters:
    ///   - name: the thread's name.
    ///   - readBufferSize: the size of the buffer connections read into (the most one read delivers).
    ///   - onThreadExit: runs on the loop's thread after the loop has closed, before ``stop()`` returns (for
    ///     example TLS's `OpenSSLThread.stop()`).
    public init(
        name: String, readBufferSize: Int = 64 * 1024, onThreadExit: (@Sendable () -> Void)? = nil
    ) throws(LoopError) {
        self.name = name
        self.onThreadExit = onThreadExit
        raw = .allocate(capacity: 1)
        wakeUp = .allocate(capacity: 1)
        idle = .allocate(capacity: 1)
        readBuffer = .allocate(byteCount: readBufferSize, alignment: 16)
        var status = uv_loop_init(raw)
        guard status == 0 else {
            raw.deallocate()
            wakeUp.deallocate()
            idle.deallocate()
            readBuffer.deallocate()
            throw LoopError(status: status, "cannot create an event loop")
        }
        // The loop is not running yet: initializing its handles here, before the thread starts, is safe.
        status = uv_async_init(
            raw, wakeUp,
            { async in
                Unmanaged<EventLoop>.fromOpaque(async!.pointee.data).takeUnretainedValue().runInbox()
            })
        precondition(status == 0, "uv_async_init failed: \(status)")
        uv_idle_init(raw, idle)
        // The handles point at the loop unretained: the thread holds the loop until they are closed.
        wakeUp.pointee.data = Unmanaged.passUnretained(self).toOpaque()
        idle.pointee.data = Unmanaged.passUnretained(self).toOpaque()
        try startThread()
    }

    deinit {
        // Reached only after the thread ended (it holds the loop): the handles are closed and the loop too.
        raw.deallocate()
        wakeUp.deallocate()
        idle.deallocate()
        readBuffer.deallocate()
    }

    /// The loop whose thread this is, or nil off every loop's thread. Lets code that runs on a worker's loop
    /// (the relay's handler) find what that worker owns without a lock.
    public static var current: EventLoop? {
        guard let raw = pthread_getspecific(currentKey) else { return nil }
        return Unmanaged<EventLoop>.fromOpaque(raw).takeUnretainedValue()
    }

    /// The thread-specific slot that holds the running loop, unretained (the thread holds the loop while it runs).
    private static let currentKey: pthread_key_t = {
        var key = pthread_key_t()
        precondition(pthread_key_create(&key, nil) == 0, "pthread_key_create failed")
        return key
    }()

    /// True on this loop's thread.
    public var isCurrent: Bool {
        threadID.load(ordering: .relaxed) == UInt(pthread_self())
    }

    /// Stops the process when called off this loop's thread (a loop-bound object used from the wrong thread
    /// would corrupt libuv's state, so this is checked in release builds too).
    public func preconditionCurrent(file: StaticString = #fileID, line: UInt = #line) {
        precondition(isCurrent, "used off its event loop's thread (\(name))", file: file, line: line)
    }

    /// The loop's cached monotonic time in milliseconds (`uv_now`): the time timers are measured in,
    /// refreshed once per turn of the loop. On the loop's thread only.
    public var now: UInt64 {
        assert(isCurrent, "EventLoop.now off its thread")
        return uv_now(raw)
    }

    /// The relay's one clock (`uv_hrtime`, CLOCK_MONOTONIC), usable on any thread: shells read it once per input
    /// and pass it to their machines.
    public static func monotonicNow() -> Instant {
        Instant(nanoseconds: uv_hrtime())
    }

    /// ``monotonicNow()`` in plain nanoseconds.
    public static func monotonicNanoseconds() -> UInt64 {
        uv_hrtime()
    }

    /// The loop's epoll descriptor (for tests that check it is closed).
    var backendDescriptor: Int32 { uv_backend_fd(raw) }

    // MARK: Work

    /// Runs `work` on the loop's thread, after the work handed over before it (first in, first out per
    /// sending thread). From another thread, the loop is woken once for any number of calls made before it
    /// drains them; from the loop's own thread, `work` runs on the next turn without a wake-up.
    /// Work handed over after ``stop()`` has begun to close the loop is dropped, and the result is false.
    @discardableResult
    public func execute(_ work: @escaping @Sendable () -> Void) -> Bool {
        if isCurrent {
            enqueue(work)
            return true
        }
        return inbox.withLock { inbox -> Bool in
            if inbox.exited { return false }
            inbox.work.append(work)
            // A send is already on its way when the queue was not empty (the loop empties it in one go). The
            // send is made under the lock: once `exited` is set the async handle may be closed.
            if inbox.work.count == 1 { uv_async_send(wakeUp) }
            return true
        }
    }

    /// On the loop's thread only: runs `work` on the loop's next turn, after the current callback has
    /// returned. For work on loop-bound (non-`Sendable`) objects.
    public func enqueue(_ work: @escaping () -> Void) {
        preconditionCurrent()
        localWork.append(work)
        if !idleActive && !shuttingDown {
            idleActive = true
            uv_idle_start(
                idle,
                { idle in
                    Unmanaged<EventLoop>.fromOpaque(idle!.pointee.data).takeUnretainedValue().runLocalWork()
                })
        }
    }

    /// Runs `work` on the loop and returns its result to the awaiting task.
    public func submit<Result: Sendable>(
        _ work: @escaping @Sendable () throws -> Result
    ) async throws -> Result {
        try await withCheckedThrowingContinuation { continuation in
            let accepted = execute { continuation.resume(with: Swift.Result { try work() }) }
            if !accepted { continuation.resume(throwing: LoopError(.stopped, "event loop \(name) has stopped")) }
        }
    }

    /// Runs `work` on the loop and waits for its result, blocking the calling thread (for start-up code that
    /// is not async). Never call it on the loop's own thread.
    public func performAndWait<Result: Sendable>(_ work: @escaping @Sendable () throws -> Result) throws -> Result {
        precondition(!isCurrent, "performAndWait on the loop's own thread would never return")
        let done = DispatchSemaphore(value: 0)
        let outcome = Mutex<Swift.Result<Result, any Error>?>(nil)
        let accepted = execute {
            let result = Swift.Result { try work() }
            outcome.withLock { $0 = result }
            done.signal()
        }
        guard accepted else { throw LoopError(.stopped, "event loop \(name) has stopped") }
        done.wait()
        return try outcome.withLock({ $0 })!.get()
    }

    private func runInbox() {
        wakeUps += 1
        // Swap the queue with an empty one that has capacity, so that neither side allocates per wake-up.
        var batch = spareWork
        spareWork = []
        let stopping = inbox.withLock { inbox in
            swap(&inbox.work, &batch)
            return inbox.stopping
        }
        for item in batch { item() }
        batch.removeAll(keepingCapacity: true)
        spareWork = batch
        if stopping && !shuttingDown { beginShutdown() }
    }

    private func runLocalWork() {
        // Work added while this batch runs waits for the next turn, so a loop of re-enqueueing work cannot
        // starve I/O.
        var batch = spareLocalWork
        spareLocalWork = []
        swap(&localWork, &batch)
        for item in batch { item() }
        batch.removeAll(keepingCapacity: true)
        spareLocalWork = batch
        if localWork.isEmpty && idleActive {
            idleActive = false
            uv_idle_stop(idle)
        }
    }

    // MARK: Thread and stop

    private func startThread() throws(LoopError) {
        let started = DispatchSemaphore(value: 0)
        let context = Unmanaged.passRetained(Start(loop: self, started: started)).toOpaque()
        var created = pthread_t()
        let status = pthread_create(
            &created, nil,
            { raw in
                let start = Unmanaged<Start>.fromOpaque(raw!).takeRetainedValue()
                start.loop.run(started: start.started)
                return nil
            }, context)
        guard status == 0 else {
            Unmanaged<Start>.fromOpaque(context).release()
            uv_close(CUV_handle(wakeUp), nil)
            uv_close(CUV_handle(idle), nil)
            uv_run(raw, UV_RUN_DEFAULT)
            uv_loop_close(raw)
            throw LoopError(.system, "cannot start the thread of event loop \(name)")
        }
        thread.withLock { $0 = created }
        // `isCurrent` must be right from the first call: wait until the thread has recorded itself.
        started.wait()
    }

    /// What the new thread needs; holds the loop (retained) until the thread ends.
    private final class Start {
        let loop: EventLoop
        let started: DispatchSemaphore
        init(loop: EventLoop, started: DispatchSemaphore) {
            self.loop = loop
            self.started = started
        }
    }

    private func run(started: DispatchSemaphore) {
        _ = name.withCString { csystem_set_thread_name($0) }
        threadID.store(UInt(pthread_self()), ordering: .relaxed)
        pthread_setspecific(Self.currentKey, Unmanaged.passUnretained(self).toOpaque())
        started.signal()
        uv_run(raw, UV_RUN_DEFAULT)
        // Close callbacks may have enqueued work or opened handles: a few more rounds, then the loop must close.
        for _ in 0..<8 {
            let work = localWork
            localWork.removeAll()
            for item in work { item() }
            if uv_loop_close(raw) == 0 {
                closedCleanly.store(true, ordering: .relaxed)
                break
            }
            closeAllHandles()
            uv_run(raw, UV_RUN_DEFAULT)
        }
        // Per-thread state of C libraries used on this loop (OpenSSL's) is freed now, not by a thread-exit
        // destructor that could run after `stop()` has returned.
        onThreadExit?()
        pthread_setspecific(Self.currentKey, nil)
        threadID.store(0, ordering: .relaxed)
        finished.signal()
    }

    /// Closes the loop: runs the work already handed over, closes every handle (their owners hear
    /// `didClose`), lets the close callbacks run, closes the `uv_loop_t` and joins its thread. Call from
    /// any thread but the loop's own (there, use ``requestStop()``); later calls wait for the first to finish.
    public func stop() {
        precondition(!isCurrent, "EventLoop.stop() on the loop's own thread would wait for itself")
        requestStop()
        waitUntilStopped()
    }

    /// Asks the loop to close as ``stop()`` does, without waiting: for any thread, the loop's own included
    /// (a SIGTERM watcher, a handler that shuts the process down). The loop closes after the current
    /// callback returns.
    public func requestStop() {
        inbox.withLock { inbox in
            if inbox.stopping || inbox.exited { return }
            inbox.stopping = true
            uv_async_send(wakeUp)
        }
    }

    /// Waits until the loop has closed and its thread has ended (after ``requestStop()``). Never on the loop's
    /// own thread.
    public func waitUntilStopped() {
        precondition(!isCurrent, "waitUntilStopped() on the loop's own thread would wait for itself")
        finished.wait()
        finished.signal()  // lets later callers through
        if let joining = thread.withLock({ value -> pthread_t? in
            defer { value = nil }
            return value
        }) {
            pthread_join(joining, nil)
        }
    }

    private func beginShutdown() {
        shuttingDown = true
        // Work handed over until now still runs (a bounded number of rounds: work that keeps handing over
        // more cannot hold the stop).
        for _ in 0..<64 {
            let work = inbox.withLock { inbox -> [@Sendable () -> Void] in
                defer { inbox.work.removeAll() }
                if inbox.work.isEmpty { inbox.exited = true }
                return inbox.work
            }
            if work.isEmpty { break }
            for item in work { item() }
        }
        inbox.withLock { inbox in
            inbox.exited = true
            inbox.work.removeAll()
        }
        for _ in 0..<64 where !localWork.isEmpty {
            let work = localWork
            localWork.removeAll()
            for item in work { item() }
        }
        closeAllHandles()
        uv_close(CUV_handle(wakeUp), nil)
        uv_close(CUV_handle(idle), nil)
        idleActive = false
    }

    /// Closes every handle of this module still open on the loop (not the loop's own async and idle handles).
    private func closeAllHandles() {
        uv_walk(
            raw,
            { handle, _ in
                guard let handle, uv_is_closing(handle) == 0, let data = handle.pointee.data else { return }
                let type = handle.pointee.type
                // The loop's own handles point at the loop, not at a LoopHandle.
                if type == UV_ASYNC || type == UV_IDLE { return }
                Unmanaged<LoopHandle>.fromOpaque(data).takeUnretainedValue().close()
            }, nil)
    }
}
