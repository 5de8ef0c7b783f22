// The tests start their children (the built executables, tools) with the CLI's own `Spawn`.
@_exported import ProcessSpawn
