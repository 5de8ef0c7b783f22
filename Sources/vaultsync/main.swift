// The `vaultsync` command as a person types it: a small front that loads nothing but the Swift runtime.
//
// When the profile's agent runs (docs/CLI.md, "The agent"), the command is handed to it as it is: the
// arguments, the environment, the current folder, and this process's standard input, output and error
// (SCM_RIGHTS). The agent runs it on its unlocked engine and answers the exit status, which this
// process ends with. Everything else — no agent, `VAULTSYNC_AGENT=off`, a locked agent, a command that
// must run in the calling process (the editor, a confirmation, sign-in) — is `vaultsync-cli`, the
// command line itself, started in this process's place (execv) with the same arguments.
//
// Why a front: a new process of the whole command line spends most of a `get`'s time before `main`
// (loading Foundation, the networking and database code, their relocations and conformance records).
// This program skips all of that when the agent answers (docs/BENCHMARKS.md, G1).

import AgentLink
import CDescriptorPassing
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

let environment = ProcessEnvironment.current()
if AgentFront.mayUseAgent(environment), let status = AgentFront.runInAgent(environment: environment) {
    exit(status)
}
FullCommandLine.replaceThisProcess()
