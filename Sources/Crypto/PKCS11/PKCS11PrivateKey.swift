import CPKCS11
import Synchronization

/// What names a key in a token: the token's label, the key object's label (`CKA_LABEL`) and id (`CKA_ID`), each
/// optional (RFC 7512: an attribute left out matches anything).
public struct PKCS11KeyName: Sendable, Equatable, CustomStringConvertible {
    public var token: String?
    public var object: String?
    public var id: [UInt8]?

    public init(token: String? = nil, object: String? = nil, id: [UInt8]? = nil) {
        self.token = token
        self.object = object
        self.id = id
    }

    /// `token "T", object "O", id 01`: the attributes given, for messages.
    public var description: String {
        var parts: [String] = []
        if let token { parts.append("token \"\(token)\"") }
        if let object { parts.append("object \"\(object)\"") }
        if let id {
            parts.append(
                "id " + id.map { byte in String(byte >> 4, radix: 16) + String(byte & 0xF, radix: 16) }.joined())
        }
        return parts.isEmpty ? "any key" : parts.joined(separator: ", ")
    }
}

/// An EC P-256 private key held in a PKCS#11 token, used through a session of its own and never read out: the relay
/// holds the key's handle and its public half, the token signs. One caller at a time uses the module (its lock); a
/// session the token lost (a device removed, a network HSM gone) is dropped, and the next signature opens and logs
/// into a new one, finding the key again (and checking it is the same key).
public final class PKCS11PrivateKey: Sendable {
    public let module: PKCS11Module
    public let name: PKCS11KeyName
    /// The public key as an uncompressed point: `04 ‖ x ‖ y`, 65 bytes.
    public let publicPoint: [UInt8]
    /// The user PIN, kept to log in again when a session is lost.
    private let pin: [UInt8]
    private let session = Mutex<Session?>(nil)

    struct Session {
        var handle: CK_SESSION_HANDLE
        var key: CK_OBJECT_HANDLE
        /// The module's initialisation it was opened in: a new one has closed it.
        var generation: UInt64
    }

    /// Opens a session on the token named by `name`, logs in with `pin` and finds exactly one private key: an EC
    /// P-256 key that may sign, with its public half readable (a public key object with the same `CKA_ID`, or the
    /// key's own `CKA_EC_POINT`).
    ///
    /// The token itself checks `pin`, also when the process is logged into it already (another key of it is open:
    /// the other environment's, or the key in force when a reload opens its successor), where a login answers any
    /// PIN with `CKR_USER_ALREADY_LOGGED_IN`: the process logs out of the token and logs in again with `pin`. A
    /// wrong one leaves the token logged out; the keys opened before log in again, with their own PIN, at their
    /// next signature.
    public init(module: PKCS11Module, name: PKCS11KeyName, pin: String) throws(PKCS11Error) {
        self.module = module
        self.name = name
        self.pin = Array(pin.utf8)
        let pin = self.pin
        let (opened, point) = try module.serialized { (generation) throws(PKCS11Error) in
            try Self.open(module: module, name: name, pin: pin, generation: generation, checkingPIN: true)
        }
        publicPoint = point
        session.withLock { $0 = opened }
    }

    deinit {
        guard let open = session.withLock({ $0 }) else { return }
        try? module.serialized { (generation) throws(PKCS11Error) in
            if open.generation == generation { _ = module.functions.pointee.C_CloseSession(open.handle) }
        }
    }

    /// The ECDSA signature (`CKM_ECDSA`) of a 32-byte digest, as PKCS#11 gives it: the raw `r ‖ s`, 64 bytes.
    /// A failure drops the session and tries once more on a new one (a session whose login another key's PIN check
    /// ended, or whose key handle a logout took); a second failure is thrown, and the next call opens a new session.
    public func signature(forDigest digest: [UInt8]) throws(PKCS11Error) -> [UInt8] {
        try session.withLock { (current: inout Session?) throws(PKCS11Error) -> [UInt8] in
            try module.serialized(reinitializing: { (generation, reinitialize) throws(PKCS11Error) -> [UInt8] in
                if let open = current, open.generation != generation { current = nil }
                var attempts = 0
                while true {
                    attempts += 1
                    if current == nil { current = try reopen(generation: generation, reinitialize: reinitialize) }
                    guard let open = current else { throw PKCS11Error(.tokenFailed, "no session") }
                    do throws(PKCS11Error) {
                        return try sign(digest, with: open)
                    } catch {
                        _ = module.functions.pointee.C_CloseSession(open.handle)
                        current = nil
                        if attempts == 2 { throw error }
                    }
                }
            })
        }
    }

    /// A new session for a key whose session was lost. A token the module no longer lists (a device removed and put
    /// back, a token directory moved away and back) may be found again only by a new initialisation of the module:
    /// one is made, and the key looked for once more.
    private func reopen(
        generation: UInt64, reinitialize: () throws(PKCS11Error) -> UInt64
    ) throws(PKCS11Error) -> Session {
        var opened: (Session, [UInt8])
        do {
            opened = try Self.open(module: module, name: name, pin: pin, generation: generation, checkingPIN: false)
        } catch  where error.code == .noToken || error.code == .moduleFailed {
            opened = try Self.open(
                module: module, name: name, pin: pin, generation: try reinitialize(), checkingPIN: false)
        }
        guard opened.1 == publicPoint else {
            _ = module.functions.pointee.C_CloseSession(opened.0.handle)
            throw PKCS11Error(.tokenFailed, "\(name) is now another key than the one loaded")
        }
        return opened.0
    }

    private func sign(_ digest: [UInt8], with open: Session) throws(PKCS11Error) -> [UInt8] {
        let functions = module.functions.pointee
        var mechanism = CK_MECHANISM(mechanism: CKM_ECDSA, pParameter: nil, ulParameterLen: 0)
        let started = functions.C_SignInit(open.handle, &mechanism, open.key)
        guard started == CKR_OK else {
            throw PKCS11Error(.tokenFailed, "\(name): C_SignInit failed: \(ReturnValue.name(started))")
        }
        var input = digest
        var signature = [UInt8](repeating: 0, count: 132)
        var length = UInt(signature.count)
        let signed = functions.C_Sign(open.handle, &input, UInt(input.count), &signature, &length)
        guard signed == CKR_OK else {
            throw PKCS11Error(.tokenFailed, "\(name): C_Sign failed: \(ReturnValue.name(signed))")
        }
        guard length == 64 else {
            throw PKCS11Error(.tokenFailed, "\(name): C_Sign gave \(length) bytes, not a P-256 signature's 64")
        }
        return Array(signature.prefix(64))
    }

    /// A new session on the named token, logged in, with the one key that matches, and the key's public point.
    /// `checkingPIN`: a token the process is logged into already is logged out of first, so that it checks `pin`.
    private static func open(
        module: PKCS11Module, name: PKCS11KeyName, pin: [UInt8], generation: UInt64, checkingPIN: Bool
    ) throws(PKCS11Error) -> (Session, [UInt8]) {
        let functions = module.functions.pointee
        let tokens = try module.tokens().filter { name.token == nil || $0.label == name.token }
        guard let token = tokens.first else {
            throw PKCS11Error(
                .noToken,
                name.token.map { "\(module.path) has no token labelled \"\($0)\"" }
                    ?? "\(module.path) has no token")
        }
        guard tokens.count == 1 else {
            throw PKCS11Error(
                .noToken,
                "\(module.path) has \(tokens.count) tokens" + (name.token == nil ? "" : " with that label")
                    + ": name one with token=")
        }
        var handle: CK_SESSION_HANDLE = 0
        let opened = functions.C_OpenSession(token.slot, CKF_SERIAL_SESSION, nil, nil, &handle)
        guard opened == CKR_OK else {
            throw PKCS11Error(
                .noToken, "token \"\(token.label)\": C_OpenSession failed: \(ReturnValue.name(opened))")
        }
        do throws(PKCS11Error) {
            var secret = pin
            var loggedIn = functions.C_Login(handle, CKU_USER, &secret, UInt(secret.count))
            if loggedIn == CKR_USER_ALREADY_LOGGED_IN && checkingPIN {
                _ = functions.C_Logout(handle)
                loggedIn = functions.C_Login(handle, CKU_USER, &secret, UInt(secret.count))
            }
            guard loggedIn == CKR_OK || loggedIn == CKR_USER_ALREADY_LOGGED_IN else {
                let why =
                    loggedIn == CKR_PIN_INCORRECT
                    ? "the PIN is wrong (APNS_PKCS11_PIN)" : "C_Login failed: \(ReturnValue.name(loggedIn))"
                throw PKCS11Error(.loginFailed, "token \"\(token.label)\" refused the login: \(why)")
            }
            let search = Search(functions: functions, session: handle)
            let keys = try search.objects(class: CKO_PRIVATE_KEY, label: name.object, id: name.id)
            guard let key = keys.first else {
                throw PKCS11Error(.noKey, "token \"\(token.label)\" holds no private key with \(name)")
            }
            guard keys.count == 1 else {
                throw PKCS11Error(
                    .severalKeys,
                    "token \"\(token.label)\" holds \(keys.count) private keys with \(name): name one (object=, id=)")
            }
            try search.requireP256Signing(key, name: name)
            return (
                Session(handle: handle, key: key, generation: generation), try search.publicPoint(of: key, name: name)
            )
        } catch {
            _ = functions.C_CloseSession(handle)
            throw error
        }
    }
}

/// Object searches and attribute reads on one session.
struct Search {
    let functions: CK_FUNCTION_LIST
    let session: CK_SESSION_HANDLE

    /// The DER of P-256's named curve (prime256v1, 1.2.840.10045.3.1.7), as `CKA_EC_PARAMS` holds it.
    static let p256Parameters: [UInt8] = [0x06, 0x08, 0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x03, 0x01, 0x07]

    func objects(class objectClass: CK_OBJECT_CLASS, label: String?, id: [UInt8]?) throws(PKCS11Error)
        -> [CK_OBJECT_HANDLE]
    {
        var values: [(CK_ATTRIBUTE_TYPE, [UInt8])] = [(CKA_CLASS, withUnsafeBytes(of: objectClass) { Array($0) })]
        if let label { values.append((CKA_LABEL, Array(label.utf8))) }
        if let id { values.append((CKA_ID, id)) }
        // The template points into buffers that live until the search is made.
        let buffers = values.map { value -> UnsafeMutableRawBufferPointer in
            let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: max(1, value.1.count), alignment: 8)
            buffer.copyBytes(from: value.1)
            return buffer
        }
        defer { for buffer in buffers { buffer.deallocate() } }
        var template = zip(values, buffers).map { value, buffer in
            CK_ATTRIBUTE(type: value.0, pValue: buffer.baseAddress, ulValueLen: UInt(value.1.count))
        }
        let started = functions.C_FindObjectsInit(session, &template, UInt(template.count))
        guard started == CKR_OK else {
            throw PKCS11Error(.tokenFailed, "C_FindObjectsInit failed: \(ReturnValue.name(started))")
        }
        defer { _ = functions.C_FindObjectsFinal(session) }
        var found: [CK_OBJECT_HANDLE] = []
        var batch = [CK_OBJECT_HANDLE](repeating: 0, count: 8)
        // Bounded: a name that matches more than a few keys is ambiguous however many there are.
        while found.count < 64 {
            var count: UInt = 0
            let result = functions.C_FindObjects(session, &batch, UInt(batch.count), &count)
            guard result == CKR_OK else {
                throw PKCS11Error(.tokenFailed, "C_FindObjects failed: \(ReturnValue.name(result))")
            }
            if count == 0 { break }
            found += batch.prefix(Int(count))
        }
        return found
    }

    /// An attribute's bytes, nil when the object has none or keeps it secret.
    func attribute(_ type: CK_ATTRIBUTE_TYPE, of object: CK_OBJECT_HANDLE) -> [UInt8]? {
        var probe = CK_ATTRIBUTE(type: type, pValue: nil, ulValueLen: 0)
        guard functions.C_GetAttributeValue(session, object, &probe, 1) == CKR_OK, probe.ulValueLen != UInt.max,
            probe.ulValueLen <= 4096
        else { return nil }
        var bytes = [UInt8](repeating: 0, count: Int(probe.ulValueLen))
        let read = bytes.withUnsafeMutableBytes { buffer -> Bool in
            var attribute = CK_ATTRIBUTE(type: type, pValue: buffer.baseAddress, ulValueLen: UInt(buffer.count))
            return functions.C_GetAttributeValue(session, object, &attribute, 1) == CKR_OK
                && attribute.ulValueLen == UInt(buffer.count)
        }
        return read ? bytes : nil
    }

    func requireP256Signing(_ key: CK_OBJECT_HANDLE, name: PKCS11KeyName) throws(PKCS11Error) {
        let type = attribute(CKA_KEY_TYPE, of: key).flatMap { bytes in
            bytes.count == MemoryLayout<CK_KEY_TYPE>.size
                ? bytes.withUnsafeBytes { $0.loadUnaligned(as: CK_KEY_TYPE.self) } : nil
        }
        guard type == CKK_EC else {
            let kind = type == CKK_RSA ? "an RSA key" : "not an EC key"
            throw PKCS11Error(.wrongKeyType, "the key with \(name) is \(kind): APNs keys are EC P-256 (ES256)")
        }
        guard attribute(CKA_EC_PARAMS, of: key) == Self.p256Parameters else {
            throw PKCS11Error(.wrongKeyType, "the key with \(name) is an EC key on another curve than P-256")
        }
        guard attribute(CKA_SIGN, of: key) == [1] else {
            throw PKCS11Error(.wrongKeyType, "the key with \(name) may not sign (CKA_SIGN is false)")
        }
    }

    /// The public point of `key`: from the public key object with the same `CKA_ID` (how tokens usually keep it), or
    /// the private key's own `CKA_EC_POINT`.
    func publicPoint(of key: CK_OBJECT_HANDLE, name: PKCS11KeyName) throws(PKCS11Error) -> [UInt8] {
        if let id = attribute(CKA_ID, of: key),
            let publicKeys = try? objects(class: CKO_PUBLIC_KEY, label: nil, id: id), publicKeys.count == 1,
            let point = attribute(CKA_EC_POINT, of: publicKeys[0]).flatMap(Self.uncompressedPoint)
        {
            return point
        }
        if let point = attribute(CKA_EC_POINT, of: key).flatMap(Self.uncompressedPoint) { return point }
        throw PKCS11Error(
            .noPublicKey,
            "the key with \(name) has no readable public half: import its public key with the same id (CKA_ID)")
    }

    /// `CKA_EC_POINT` as the standard has it (DER OCTET STRING of the point) or as some modules give it (the bare
    /// point): the uncompressed P-256 point, 65 bytes.
    static func uncompressedPoint(_ value: [UInt8]) -> [UInt8]? {
        if value.count == 65, value[0] == 0x04 { return value }
        if value.count == 67, value[0] == 0x04, value[1] == 0x41, value[2] == 0x04 { return Array(value.dropFirst(2)) }
        return nil
    }
}
