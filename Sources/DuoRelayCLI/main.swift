import Foundation
import RelayCrypto

// duo-relay: parses the command line and hands over to one command.
// Before anything uses OpenSSL: no exit-time cleanup racing with threads still at work (see OpenSSLLibrary).
OpenSSLLibrary.initializeWithoutExitCleanup()
let arguments = Array(CommandLine.arguments.dropFirst())
let status: Int32
switch arguments.first {
case "serve": status = ServeCommand.run(Array(arguments.dropFirst()))
case "check": status = CheckCommand.run(Array(arguments.dropFirst()))
case "keygen": status = KeygenCommand.run(Array(arguments.dropFirst()))
case "dev": status = DevCommand.run(Array(arguments.dropFirst()))
case "apns-sim": status = SimulatorCommand.run(Array(arguments.dropFirst()))
case "push": status = PushCommand.run(Array(arguments.dropFirst()))
case "help", "--help", "-h": status = Usage.print()
case "version", "--version": status = Usage.printVersion()
case nil: status = Usage.failWithUsage()
default: status = Usage.fail("unknown command" + (arguments.first.map { " '\($0)'" } ?? ""))
}
exit(status)
