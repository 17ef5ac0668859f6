//! `braid-install`: see braid-install/README.md.

use std::io::Write;
use std::process::ExitCode;

fn main() -> ExitCode {
    match braid_install::options::parse(std::env::args().skip(1)) {
        Ok(braid_install::Action::Help) => {
            let _ = std::io::stdout().write_all(braid_install::options::USAGE.as_bytes());
            ExitCode::SUCCESS
        }
        Ok(braid_install::Action::Version) => {
            let _ = writeln!(std::io::stdout(), "braid-install {}", env!("CARGO_PKG_VERSION"));
            ExitCode::SUCCESS
        }
        Ok(braid_install::Action::Run(o)) => match braid_install::run::run(&o) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                braid_install::log(&format!("error: {e}"));
                ExitCode::from(e.exit_code())
            }
        },
        Err(e) => {
            braid_install::log(&format!("error: {e}"));
            ExitCode::from(e.exit_code())
        }
    }
}
