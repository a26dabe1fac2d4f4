import Dispatch
import EventLoops
import Synchronization

/// The load generator's one thread of load: each measurement runs on an event loop of its own, and the
/// calling thread waits for its result.
enum LoadLoop {
    /// Runs `start` on a new loop named `name`; the measurement calls `finish` once, on the loop's thread, with
    /// its result (later calls are ignored). The loop then stops: every connection and timer still open is closed.
    static func run<Result: Sendable>(
        _ name: String,
        _ start:
            @escaping @Sendable (_ loop: EventLoop, _ finish: @escaping (Swift.Result<Result, LoadError>) -> Void)
            throws(LoadError) -> Void
    ) throws(LoadError) -> Result {
        let loop: EventLoop
        do {
            loop = try EventLoop(name: name)
        } catch {
            throw LoadError(.failed, "cannot start an event loop: \(error.reason)")
        }
        let outcome = Mutex<Swift.Result<Result, LoadError>?>(nil)
        let done = DispatchSemaphore(value: 0)
        loop.execute {
            let finish = { (result: Swift.Result<Result, LoadError>) in
                let first = outcome.withLock { outcome -> Bool in
                    if case .some = outcome { return false }
                    outcome = result
                    return true
                }
                if first { done.signal() }
            }
            do throws(LoadError) {
                try start(loop, finish)
            } catch {
                finish(.failure(error))
            }
        }
        done.wait()
        loop.stop()
        return try outcome.withLock { $0! }.get()
    }
}
