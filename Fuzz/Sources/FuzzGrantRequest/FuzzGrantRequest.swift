import Foundation
import FuzzSupport
import RelayCore
import RelayCrypto

/// `POST /v1/grant` body validation: whatever `GrantRequest.parse` accepts has a 1...512-byte token
/// that is the body's hex read independently, and a grant sealed for it opens back to it (the
/// token a phone registers is the one its pushes reach). Whatever it refuses is `bad_request`.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzGrantRequest(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    GrantRequestTarget.run(fuzzInput(data, size))
    return 0
}

@_cdecl("FuzzGrantRequest_main")
public func fuzzGrantRequestMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
    runLibFuzzer(argc, argv, fuzzGrantRequest)
}

enum GrantRequestTarget {
    static func run(_ body: [UInt8]) {
        let request: GrantRequest
        do {
            request = try GrantRequest.parse(body)
        } catch {
            invariant(error == .badRequest, "a refused grant body is not bad_request")
            return
        }
        invariant(
            !request.token.isEmpty && request.token.count <= GrantRequest.maximumTokenLength / 2, "token size")
        // Read back independently with JSONSerialization: the parser refuses a wanted member given
        // twice, so whichever duplicate JSONSerialization keeps cannot matter here.
        let object = try? JSONSerialization.jsonObject(with: Data(body))
        guard let fields = object as? [String: Any], let token = fields["token"] as? String,
            let environment = fields["environment"] as? String
        else {
            invariant(false, "an accepted body does not read as an object with two strings")
            return
        }
        invariant(Hex.encode(request.token) == token.lowercased(), "token bytes are not the body's hex")
        invariant(request.environment.name == environment, "environment is not the body's")

        let grant = Grant(environment: request.environment, issuedAt: FuzzKeys.now, token: request.token)
        let text = try? GrantCodec.seal(grant, keyID: 1, keys: FuzzKeys.relayKeys)
        invariant(text != nil, "an accepted token could not be sealed")
        let opened = try? GrantCodec.open(
            text ?? "", keys: FuzzKeys.relayKeys, now: FuzzKeys.now, lifetime: FuzzKeys.lifetime)
        invariant(opened == grant, "the grant for an accepted token does not open to it")
        invariant(
            text.map { $0.utf8.count <= PushRequest.maximumGrantLength } ?? false, "grant longer than a push allows")
    }
}
