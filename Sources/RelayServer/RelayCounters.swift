import RelayCore
import Synchronization

/// Aggregate counts of what the relay answered: no label ever names a phone, channel or message.
final class RelayCounters: Sendable {
    enum Event: String, Sendable {
        case grantIssued = "grant_issued"
        case pushDelivered = "push_delivered"
        case addressLimited = "address_limited"
        case phoneLimited = "phone_limited"
        case overloaded = "overloaded"
    }

    private let values = Mutex<[String: Int]>([:])

    func count(_ event: Event) {
        values.withLock { $0[event.rawValue, default: 0] += 1 }
    }

    func count(_ code: RelayError.Code) {
        values.withLock { $0["error_" + code.rawValue, default: 0] += 1 }
    }

    var snapshot: [String: Int] { values.withLock { $0 } }
}
