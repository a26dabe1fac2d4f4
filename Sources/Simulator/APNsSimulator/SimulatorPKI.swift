import TLS

/// The simulator's certificates: a throwaway CA and the server certificate it signed (``TLS/LocalPKI``).
public typealias SimulatorPKI = LocalPKI
