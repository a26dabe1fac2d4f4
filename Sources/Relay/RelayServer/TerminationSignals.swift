import Dispatch
import Foundation

/// Waiting for SIGTERM or SIGINT, for commands that serve until told to stop.
public enum TerminationSignals {
    /// Blocks the calling thread until SIGTERM or SIGINT arrives.
    public static func wait() {
        let done = DispatchSemaphore(value: 0)
        let sources = [SIGTERM, SIGINT].map { number -> any DispatchSourceSignal in
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler { done.signal() }
            source.resume()
            return source
        }
        done.wait()
        sources.forEach { $0.cancel() }
    }
}
