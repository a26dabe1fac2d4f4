import Glibc

// duo-relay-recipes: runs the documents' command blocks (scripts/doc-test, scripts/container-test).
exit(RecipeCommand.run(Array(CommandLine.arguments.dropFirst())))
