import ErrorCodes

/// An error of the PKCS#11 client: a code to decide by and a reason for the operator. A reason names the module's
/// path, the token's and the key's labels and the PKCS#11 return value (`CKR_PIN_INCORRECT`); never a PIN.
public typealias PKCS11Error = ModuleError<PKCS11ErrorDomain>

/// The domain of ``PKCS11Error``'s codes.
public enum PKCS11ErrorDomain {}

extension ErrorCode where Domain == PKCS11ErrorDomain {
    /// The module's file cannot be loaded (no such file, not a shared library, missing dependencies).
    public static var unloadable: Self { Self("unloadable") }
    /// The file loads but is no PKCS#11 module (no `C_GetFunctionList`).
    public static var notAModule: Self { Self("notAModule") }
    /// The module refused `C_Initialize` or another call before any token was reached.
    public static var moduleFailed: Self { Self("moduleFailed") }
    /// No token, or more than one, matches the token the key is named in.
    public static var noToken: Self { Self("noToken") }
    /// The token refused the user PIN (wrong, locked, expired).
    public static var loginFailed: Self { Self("loginFailed") }
    /// No private key matches.
    public static var noKey: Self { Self("noKey") }
    /// More than one private key matches: the name is ambiguous.
    public static var severalKeys: Self { Self("severalKeys") }
    /// The key matches but is not an EC P-256 key that may sign.
    public static var wrongKeyType: Self { Self("wrongKeyType") }
    /// Neither a public key object with the key's id nor the key's `CKA_EC_POINT` gives its public half.
    public static var noPublicKey: Self { Self("noPublicKey") }
    /// The token stopped answering or would not sign (a session lost, a device removed, a network HSM away).
    public static var tokenFailed: Self { Self("tokenFailed") }
}

/// PKCS#11's return values by name, for the reasons: the ones a module gives for the failures an operator can act on.
enum ReturnValue {
    static func name(_ value: UInt) -> String {
        names[value] ?? "CKR_0x" + String(value, radix: 16, uppercase: true)
    }

    private static let names: [UInt: String] = [
        0x0: "CKR_OK", 0x1: "CKR_CANCEL", 0x2: "CKR_HOST_MEMORY", 0x3: "CKR_SLOT_ID_INVALID",
        0x5: "CKR_GENERAL_ERROR", 0x6: "CKR_FUNCTION_FAILED", 0x7: "CKR_ARGUMENTS_BAD", 0x30: "CKR_DEVICE_ERROR",
        0x31: "CKR_DEVICE_MEMORY", 0x32: "CKR_DEVICE_REMOVED", 0x54: "CKR_FUNCTION_NOT_SUPPORTED",
        0x60: "CKR_KEY_HANDLE_INVALID", 0x68: "CKR_KEY_FUNCTION_NOT_PERMITTED", 0x70: "CKR_MECHANISM_INVALID",
        0x82: "CKR_OBJECT_HANDLE_INVALID", 0xA0: "CKR_PIN_INCORRECT", 0xA1: "CKR_PIN_INVALID",
        0xA2: "CKR_PIN_LEN_RANGE", 0xA3: "CKR_PIN_EXPIRED", 0xA4: "CKR_PIN_LOCKED", 0xB0: "CKR_SESSION_CLOSED",
        0xB1: "CKR_SESSION_COUNT", 0xB3: "CKR_SESSION_HANDLE_INVALID", 0xE0: "CKR_TOKEN_NOT_PRESENT",
        0xE1: "CKR_TOKEN_NOT_RECOGNIZED", 0x100: "CKR_USER_ALREADY_LOGGED_IN", 0x101: "CKR_USER_NOT_LOGGED_IN",
        0x102: "CKR_USER_PIN_NOT_INITIALIZED", 0x190: "CKR_CRYPTOKI_NOT_INITIALIZED",
        0x191: "CKR_CRYPTOKI_ALREADY_INITIALIZED",
    ]
}
