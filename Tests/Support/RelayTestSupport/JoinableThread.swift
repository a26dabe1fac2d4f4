import Glibc

/// A thread of a test's own that runs one closure and is joined: when ``join()`` returns, the thread has ended and
/// has released the closure, with everything it captured.
///
/// Foundation's `Thread` cannot promise that. Its object holds the closure until the exiting thread's destructors
/// (thread-specific data) release it, after the closure has returned, so a test that waited for the closure to
/// finish could still end before its fixture was released; the fixture's `deinit` (stopping a relay process,
/// `Process.waitUntilExit`, which makes a CoreFoundation run loop) then ran inside those destructors, after the test.
/// Under ThreadSanitizer that killed the test process: CoreFoundation tore that late run loop down after the sanitizer
/// had finalized the thread (Fuzz/README.md, "scripts/sanitize").
public struct JoinableThread: Sendable {
    private let thread: pthread_t

    /// Starts `body` on a new thread with a stack of `stackSize` bytes (the system's default size if nil).
    public init(stackSize: Int? = nil, _ body: @escaping @Sendable () -> Void) throws(TestFailure) {
        var attributes = pthread_attr_t()
        pthread_attr_init(&attributes)
        defer { pthread_attr_destroy(&attributes) }
        if let stackSize { pthread_attr_setstacksize(&attributes, stackSize) }
        // Retained for the thread, which releases it (and the closure) before it ends.
        let work = Unmanaged.passRetained(Work(body)).toOpaque()
        var created = pthread_t()
        let status = pthread_create(
            &created, &attributes,
            { raw in
                Unmanaged<Work>.fromOpaque(raw!).takeRetainedValue().body()
                return nil
            }, work)
        guard status == 0 else {
            Unmanaged<Work>.fromOpaque(work).release()
            throw TestFailure("cannot start a thread: \(String(cString: strerror(status)))")
        }
        thread = created
    }

    /// Waits until the thread has ended. Call it exactly once.
    public func join() {
        pthread_join(thread, nil)
    }

    private final class Work {
        let body: @Sendable () -> Void
        init(_ body: @escaping @Sendable () -> Void) { self.body = body }
    }
}
