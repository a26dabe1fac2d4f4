import Foundation

extension RelayConfiguration.Server {
    /// The default of `server.threads`: the cores this process may run on (its CPU affinity, as
    /// `activeProcessorCount` reads it), within the key's range 1 to 64.
    public static let defaultThreads = min(64, max(1, ProcessInfo.processInfo.activeProcessorCount))
}
