// RelayServer
