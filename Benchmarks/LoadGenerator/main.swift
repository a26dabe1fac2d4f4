import Glibc

// duo-relay-load: the benchmark's load generator and APNs simulator harness (scripts/bench).
exit(LoadCommand.run(Array(CommandLine.arguments.dropFirst())))
