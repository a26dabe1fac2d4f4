// RelayCore
