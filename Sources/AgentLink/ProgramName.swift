/// Which surface a command line asks for, by the program's name: a link named `bw` is Bitwarden's CLI
/// (docs/BW-COMPATIBILITY.md), the same as `vaultsync bw …`. The front and the command line both read it
/// here, so that the agent is handed the same arguments the command line would parse.
public enum ProgramName {
    /// The arguments after the program's name, with `bw` in front when the program was called `bw`.
    public static func commandArguments(_ arguments: [String]) -> [String] {
        let name = arguments.first.map { $0.split(separator: "/").last.map(String.init) ?? $0 } ?? ""
        return (name == "bw" ? ["bw"] : []) + arguments.dropFirst()
    }
}
