import CSystem
import Foundation
import Glibc
import RelayCore
import RelayCrypto

/// `mint`: asks the relay for one grant per fresh random device token (over a few keep-alive
/// connections), then writes one `POST /v1/push` body per grant, each with its own random `sealed`,
/// `id` and `thread`, as JSON lines.
struct GrantMinter {
    var address: sockaddr_in
    var host: String
    var count: Int
    var connections: Int
    var environment: String

    func run() throws(LoadError) -> [String] {
        let poll = EventPoll()
        var pool: [ClientConnection] = []
        var assigned: [Int] = []
        for index in 0..<max(1, min(connections, count)) {
            guard let connection = ClientConnection(to: address) else {
                throw LoadError(.failed, "cannot connect (errno \(errno))")
            }
            pool.append(connection)
            assigned.append(-1)
            poll.add(connection.fd, token: UInt64(index), writable: true)
        }
        var grants = [String](repeating: "", count: count)
        var next = 0
        var done = 0
        func start(_ index: Int) {
            guard next < count else { return }
            let token = Hex.encode(SecureRandom.bytes(count: 32))
            let body = Array(#"{"token":"\#(token)","environment":"\#(environment)"}"#.utf8)
            assigned[index] = next
            next += 1
            _ = pool[index].send(HTTPRequestBytes.post(path: "/v1/grant", host: host, body: body))
        }
        let deadline = MonotonicClock.now() + 120_000_000_000
        var failure: LoadError?
        while done < count && failure == nil {
            guard MonotonicClock.now() < deadline else { throw LoadError(.failed, "minting grants took too long") }
            poll.wait(timeoutMilliseconds: 100) { token, events in
                let index = Int(token)
                let connection = pool[index]
                if !connection.connected {
                    guard events & EPOLLOUT.rawValue != 0 else { return }
                    guard connection.finishConnect() else {
                        failure = LoadError(.failed, "cannot connect to the relay")
                        return
                    }
                    poll.modify(connection.fd, token: token, writable: false)
                    start(index)
                    return
                }
                if connection.wantsWrite { _ = connection.flush() }
                guard let responses = connection.readResponses() else {
                    failure = LoadError(.failed, "the relay closed a connection while minting")
                    return
                }
                for response in responses {
                    guard response.status == 200, let grant = Self.grant(in: response.body) else {
                        failure = LoadError(.failed, "POST /v1/grant answered \(response.status)")
                        return
                    }
                    grants[assigned[index]] = grant
                    done += 1
                    start(index)
                }
            }
        }
        if let failure { throw failure }
        return grants.map(Self.pushBody(grant:))
    }

    /// The `grant` value of `{"grant":"...","expires_at":"..."}`.
    static func grant(in body: ArraySlice<UInt8>) -> String? {
        let key = Array(#""grant":""#.utf8)
        let bytes = Array(body)
        guard bytes.count > key.count else { return nil }
        for start in 0...(bytes.count - key.count) where Array(bytes[start..<start + key.count]) == key {
            let valueStart = start + key.count
            guard let end = bytes[valueStart...].firstIndex(of: UInt8(ascii: "\"")) else { return nil }
            return String(decoding: bytes[valueStart..<end], as: UTF8.self)
        }
        return nil
    }

    /// A valid push body for `grant`: fresh random sealed bytes, id and thread.
    static func pushBody(grant: String) -> String {
        let sealed = Base64.encode(SecureRandom.bytes(count: PushRequest.sealedByteCount))
        let id = Hex.encode(SecureRandom.bytes(count: 32))
        let thread = Hex.encode(SecureRandom.bytes(count: 32))
        return #"{"grant":"\#(grant)","sealed":"\#(sealed)","id":"\#(id)","thread":"\#(thread)"}"#
    }
}
