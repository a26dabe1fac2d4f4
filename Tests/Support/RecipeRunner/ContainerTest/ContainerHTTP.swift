import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// GET requests to what a run publishes on the host's loopback (the probes' endpoints, /metrics), answered
/// within a few seconds or not at all.
enum ContainerHTTP {
    struct Answer {
        var status: Int
        var body: String
    }

    /// One GET of `url`; nil when no answer came within `timeout` seconds.
    static func get(_ url: String, timeout: Double = 2) -> Answer? {
        guard let target = URL(string: url) else { return nil }
        var request = URLRequest(url: target)
        request.timeoutInterval = timeout
        let box = Box()
        let done = DispatchSemaphore(value: 0)
        let task = URLSession.shared.dataTask(with: request) { data, response, _ in
            if let response = response as? HTTPURLResponse {
                box.answer = Answer(status: response.statusCode, body: String(decoding: data ?? Data(), as: UTF8.self))
            }
            done.signal()
        }
        task.resume()
        if done.wait(timeout: .now() + timeout + 1) == .timedOut {
            task.cancel()
            return nil
        }
        return box.answer
    }

    /// Whether `url` answers 200 within 150 tries 0.2 s apart (about 30 s and more with the requests' time).
    static func waitFor200(_ url: String) throws(ContainerTestFailure) -> Bool {
        try ContainerProcesses.poll(150, pause: 0.2) { get(url)?.status == 200 }
    }

    private final class Box: @unchecked Sendable {
        private let lock = NSLock()
        private var stored: Answer?
        var answer: Answer? {
            get { lock.withLock { stored } }
            set { lock.withLock { stored = newValue } }
        }
    }
}
