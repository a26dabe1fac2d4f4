/// The one shape of the project's errors (swift-asn1's): an opaque ``CodedError/code`` to decide by,
/// a ``CodedError/reason`` for people, and equality by code only (a reason's wording never decides anything).
///
/// A module's error adopts it with ``ErrorCode`` as its code and declares its codes as static members, so that a
/// new code never breaks a caller (there is no enum to switch over):
///
/// ```swift
/// public struct CryptoError: CodedError {
///     public typealias Code = ErrorCode<CryptoError>
///     public let code: Code
///     public let reason: String
///     public init(_ code: Code, _ reason: String) { ... }
/// }
/// extension ErrorCode where Domain == CryptoError {
///     /// A key has the wrong size or cannot be used.
///     public static var invalidKey: Self { Self("invalidKey") }
/// }
/// ```
public protocol CodedError: Error, Hashable, CustomStringConvertible {
    /// What went wrong, to decide by: usually ``ErrorCode``; an error whose codes map onto something in one
    /// exhaustive switch (HTTP1's parse errors onto statuses) may bring its own.
    associatedtype Code: Hashable, CustomStringConvertible
    /// What went wrong, to decide by.
    var code: Code { get }
    /// A human explanation; never holds a secret or a peer's bytes.
    var reason: String { get }
}

extension CodedError {
    /// Equal when the codes are: the reason is for people.
    public static func == (lhs: Self, rhs: Self) -> Bool { lhs.code == rhs.code }

    public func hash(into hasher: inout Hasher) { hasher.combine(code) }

    /// `code: reason`.
    public var description: String { "\(code): \(reason)" }
}

/// An error's code: an opaque name, one type per error (`Domain`), so that one module's codes cannot be
/// compared with another's. Codes are the static members a module declares on `ErrorCode where Domain == …`.
public struct ErrorCode<Domain>: Hashable, Sendable, CustomStringConvertible {
    /// The code's short stable name (`invalidKey`), as logs and descriptions show it.
    public let name: String

    /// A code named `name`; a module declares each of its codes once, as a static member.
    public init(_ name: String) { self.name = name }

    public var description: String { name }
}

/// The error of a module that needs nothing but a code and a reason: written once here, named by each module
/// (`public typealias CryptoError = ModuleError<CryptoErrorDomain>`, with `public enum CryptoErrorDomain {}` and
/// its codes on `ErrorCode where Domain == CryptoErrorDomain`). A module whose error carries more (`LoopError`'s
/// status) writes its own struct and adopts ``CodedError``.
public struct ModuleError<Domain>: CodedError {
    /// What went wrong, to decide by.
    public let code: ErrorCode<Domain>
    /// A human explanation; never holds a secret or a peer's bytes.
    public let reason: String

    /// An error with a code and a human reason.
    public init(_ code: ErrorCode<Domain>, _ reason: String) {
        self.code = code
        self.reason = reason
    }
}
