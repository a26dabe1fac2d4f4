import CPKCS11
import Glibc
import Synchronization

/// A PKCS#11 module (an HSM's, a TPM's, SoftHSM's shared library), loaded with `dlopen` and initialised once per
/// process: `C_Initialize` may be called only once by a process's code, and every key of the same module (the sandbox
/// and the production key, the keys of a reload) shares that one initialisation. A module is never unloaded: a
/// session, a reload's new key or a `check` may need it again, and a library's own threads may still run.
// The function list is the module's, valid for the process's life (the library is never closed); PKCS#11 with
// CKF_OS_LOCKING_OK lets any thread call it, and the sessions that need one caller at a time are each guarded by
// their key's lock.
public final class PKCS11Module: @unchecked Sendable {
    /// The path it was loaded from, as configured.
    public let path: String
    let functions: UnsafeMutablePointer<CK_FUNCTION_LIST>
    /// One caller at a time, and how many times the module has been initialised again: every call into the module
    /// is made under this lock (the relay calls a token a few times an hour, so nothing waits for long), so that a
    /// new initialisation never runs beside another call, and a session opened before it is known to be gone.
    private let calls = Mutex<UInt64>(0)

    private init(path: String, functions: UnsafeMutablePointer<CK_FUNCTION_LIST>) {
        self.path = path
        self.functions = functions
    }

    /// Runs `body` as the only caller of the module, with the current initialisation's number.
    func serialized<Result>(_ body: (UInt64) throws(PKCS11Error) -> Result) throws(PKCS11Error) -> Result {
        try calls.withLock { (generation: inout UInt64) throws(PKCS11Error) -> Result in try body(generation) }
    }

    /// Finalises and initialises the module again (under ``serialized(_:)``'s lock, from a caller that holds it): a
    /// module finds its tokens at `C_Initialize`, and some (SoftHSM, modules for removable devices) never find a
    /// token again that went away while they ran. Every session of the old initialisation is gone; a key finds out
    /// by the number changing.
    func reinitializeHoldingLock() throws(PKCS11Error) {
        _ = functions.pointee.C_Finalize(nil)
        var arguments = CK_C_INITIALIZE_ARGS()
        arguments.flags = CKF_OS_LOCKING_OK
        let initialized = withUnsafeMutablePointer(to: &arguments) {
            functions.pointee.C_Initialize(UnsafeMutableRawPointer($0))
        }
        guard initialized == CKR_OK || initialized == CKR_CRYPTOKI_ALREADY_INITIALIZED else {
            throw PKCS11Error(.moduleFailed, "\(path): C_Initialize failed: \(ReturnValue.name(initialized))")
        }
    }

    /// ``serialized(_:)`` with the chance to initialise the module again: `body` gets the number and a way to ask
    /// for a new initialisation (which gives the next number).
    func serialized<Result>(
        reinitializing body: (UInt64, () throws(PKCS11Error) -> UInt64) throws(PKCS11Error) -> Result
    ) throws(PKCS11Error) -> Result {
        try calls.withLock { (generation: inout UInt64) throws(PKCS11Error) -> Result in
            var current = generation
            defer { generation = current }
            return try body(generation) { () throws(PKCS11Error) -> UInt64 in
                current += 1
                try reinitializeHoldingLock()
                return current
            }
        }
    }

    /// The modules loaded so far, by path: loaded and initialised once, whoever asks.
    private static let loaded = Mutex<[String: PKCS11Module]>([:])

    /// The module at `path`, loaded and initialised on first use.
    public static func load(path: String) throws(PKCS11Error) -> PKCS11Module {
        try loaded.withLock { (loaded: inout [String: PKCS11Module]) throws(PKCS11Error) -> PKCS11Module in
            if let module = loaded[path] { return module }
            let module = try open(path)
            loaded[path] = module
            return module
        }
    }

    private static func open(_ path: String) throws(PKCS11Error) -> PKCS11Module {
        guard let handle = dlopen(path, RTLD_NOW | RTLD_LOCAL) else {
            let detail = dlerror().map { String(cString: $0) } ?? "dlopen failed"
            throw PKCS11Error(.unloadable, "\(path) cannot be loaded as a shared library (\(detail))")
        }
        guard let symbol = dlsym(handle, "C_GetFunctionList") else {
            dlclose(handle)
            throw PKCS11Error(.notAModule, "\(path) is not a PKCS#11 module (it has no C_GetFunctionList)")
        }
        let getFunctionList = unsafeBitCast(symbol, to: CK_C_GetFunctionList.self)
        var list: UnsafeMutablePointer<CK_FUNCTION_LIST>?
        let listed = getFunctionList(&list)
        guard listed == CKR_OK, let list, list.pointee.C_Initialize != nil else {
            dlclose(handle)
            throw PKCS11Error(
                .notAModule, "\(path) gives no PKCS#11 function list (C_GetFunctionList: \(ReturnValue.name(listed)))")
        }
        // The module makes its own locks with the system's (CKF_OS_LOCKING_OK): the relay signs from one thread per
        // key, and `check` and a reload open keys from others.
        var arguments = CK_C_INITIALIZE_ARGS()
        arguments.flags = CKF_OS_LOCKING_OK
        let initialized = withUnsafeMutablePointer(to: &arguments) {
            list.pointee.C_Initialize(UnsafeMutableRawPointer($0))
        }
        guard initialized == CKR_OK || initialized == CKR_CRYPTOKI_ALREADY_INITIALIZED else {
            // Not closed: a module that failed half way may have started threads of its own.
            throw PKCS11Error(.moduleFailed, "\(path): C_Initialize failed: \(ReturnValue.name(initialized))")
        }
        return PKCS11Module(path: path, functions: list)
    }

    /// The slots that hold a token, with the token's label (its 32 bytes, trailing spaces removed).
    func tokens() throws(PKCS11Error) -> [(slot: CK_SLOT_ID, label: String)] {
        var count: UInt = 0
        var result = functions.pointee.C_GetSlotList(1, nil, &count)
        guard result == CKR_OK else {
            throw PKCS11Error(.moduleFailed, "\(path): C_GetSlotList failed: \(ReturnValue.name(result))")
        }
        var slots = [CK_SLOT_ID](repeating: 0, count: Int(count))
        if count > 0 {
            result = functions.pointee.C_GetSlotList(1, &slots, &count)
            guard result == CKR_OK else {
                throw PKCS11Error(.moduleFailed, "\(path): C_GetSlotList failed: \(ReturnValue.name(result))")
            }
        }
        var tokens: [(slot: CK_SLOT_ID, label: String)] = []
        for slot in slots.prefix(Int(count)) {
            var info = CK_TOKEN_INFO()
            guard functions.pointee.C_GetTokenInfo(slot, &info) == CKR_OK else { continue }
            let label = withUnsafeBytes(of: info.label) { bytes in
                String(decoding: bytes.reversed().drop(while: { $0 == 0x20 || $0 == 0 }).reversed(), as: UTF8.self)
            }
            tokens.append((slot, label))
        }
        return tokens
    }
}
