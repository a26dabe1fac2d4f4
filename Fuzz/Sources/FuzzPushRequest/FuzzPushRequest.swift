import Foundation
import FuzzSupport
import JSON
import RelayCore
import RelayCrypto

/// `POST /v1/push` body validation: whatever `PushRequest.parse` accepts meets docs/DESIGN.md's
/// constraints, survives a JSON round trip unchanged, and builds an APNs payload that is valid
/// JSON within APNs' 4096 bytes carrying `sealed` and `thread` verbatim. Whatever it refuses is
/// `bad_request`.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzPushRequest(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    PushTarget.run(fuzzInput(data, size))
    return 0
}

@_cdecl("FuzzPushRequest_main")
public func fuzzPushRequestMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
    runLibFuzzer(argc, argv, fuzzPushRequest)
}

enum PushTarget {
    private struct Wire: Encodable {
        let grant: String
        let sealed: String
        let id: String
        let thread: String
    }

    static let settings = NotificationSettings(topic: "app.openduo.pocket", placeholder: "PUSH", expirationSeconds: 0)

    static func run(_ body: [UInt8]) {
        let request: PushRequest
        do {
            request = try PushRequest.parse(body)
        } catch {
            invariant(error == .badRequest, "a refused push body is not bad_request")
            return
        }
        invariant(request.sealed.utf8.count == PushRequest.sealedTextLength, "sealed text length")
        let sealed = Base64.decode(request.sealed)
        invariant(sealed?.count == PushRequest.sealedByteCount, "sealed does not decode to 2934 bytes")
        invariant(sealed.map(Base64.encode) == request.sealed, "sealed is not canonical base64")
        for field in [request.id, request.thread] {
            invariant(field.utf8.count == 64 && field.utf8.allSatisfy(isHexDigit), "id or thread is not 64 hex")
        }

        let encoded = try? JSONEncoder().encode(
            Wire(grant: request.grant, sealed: request.sealed, id: request.id, thread: request.thread))
        let reparsed = try? PushRequest.parse(Array(encoded ?? Data()))
        invariant(reparsed == request, "an accepted push did not survive a JSON round trip")

        let notification = Notification(push: request, token: [0xAB, 0xCD], settings: settings, expiresAt: 0)
        invariant(notification.payload.count <= Notification.maximumPayloadSize, "payload above 4096 bytes")
        invariant(
            notification.payload.count == Notification.largestPayloadSize(placeholder: settings.placeholder),
            "payload size is not the fixed size")
        let payload = JSONValue.parse(notification.payload)
        guard case .object(let root)? = payload, case .object(let aps)? = root["aps"] else {
            invariant(false, "payload is not a JSON object with aps")
            return
        }
        invariant(root["sealed"] == .string(request.sealed), "payload sealed differs")
        invariant(aps["thread-id"] == .string(request.thread), "payload thread-id differs")
    }

    static func isHexDigit(_ byte: UInt8) -> Bool {
        (0x30...0x39).contains(byte) || (0x41...0x46).contains(byte) || (0x61...0x66).contains(byte)
    }
}
