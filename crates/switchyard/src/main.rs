//! The `switchyard` command: parses arguments and calls into the library.

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use switchyard::config::source::Source;

// glibc malloc showed up at ~10% of the gateway's CPU under load; mimalloc's
// thread-local free lists suit many small short-lived request allocations.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(
    name = "switchyard",
    version,
    about = "An LLM gateway: one OpenAI/Anthropic-compatible door in front of many providers",
    long_about = "An LLM gateway: one OpenAI/Anthropic-compatible door in front of many providers.\n\n\
        With no command it runs `serve`: the config in --config or ./switchyard.yaml, else the \
        built-in demo (mock providers, no keys) on 127.0.0.1:8080, admin on 127.0.0.1:9090.",
    args_conflicts_with_subcommands = true,
    after_help = "Environment:\n  \
        SWITCHYARD_LISTEN        the client API's address, instead of the config's server.listen\n  \
        SWITCHYARD_ADMIN_LISTEN  the admin API's address, instead of server.admin_listen\n  \
        (--listen and --admin-listen win over them)"
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    /// With no command: `serve`'s options.
    #[command(flatten)]
    serve: ServeArgs,
}

#[derive(clap::Args)]
struct ServeArgs {
    /// Config file, or etcd://HOST:PORT/KEY for a config kept in etcd (read,
    /// then watched); default: ./switchyard.yaml if there is one, else the
    /// built-in demo.
    #[arg(long, value_name = "FILE|etcd://HOST:PORT/KEY", value_parser = Source::parse)]
    config: Option<Source>,
    /// The client API's address, e.g. 0.0.0.0:8080: replaces `server.listen`
    /// (and SWITCHYARD_LISTEN).
    #[arg(long, value_name = "ADDR")]
    listen: Option<String>,
    /// The admin API's address, e.g. 127.0.0.1:9191: replaces
    /// `server.admin_listen` (and SWITCHYARD_ADMIN_LISTEN).
    #[arg(long, value_name = "ADDR")]
    admin_listen: Option<String>,
}

#[derive(Subcommand)]
enum Command {
    /// Run the gateway (the built-in demo when there is no config).
    Serve(ServeArgs),
    /// Validate a config (a file, or etcd://HOST:PORT/KEY): print every
    /// problem with file:line:column.
    Check {
        #[arg(long, value_name = "FILE|etcd://HOST:PORT/KEY", value_parser = Source::parse)]
        config: Source,
    },
    /// Tokens, requests and cost per group, from the usage store.
    Usage {
        #[arg(long, value_name = "FILE|etcd://HOST:PORT/KEY", value_parser = Source::parse)]
        config: Option<Source>,
        /// RFC 3339, a date, or a duration back from now (`24h`, `7d`).
        #[arg(long)]
        since: Option<String>,
        #[arg(long)]
        until: Option<String>,
        #[arg(long, value_parser = ["client", "model", "route", "deployment"])]
        group_by: Option<String>,
        #[arg(long, default_value = "table", value_parser = ["table", "csv", "json"])]
        format: String,
    },
    /// Run the mock providers alone.
    Mock {
        #[arg(long, default_value = "127.0.0.1:8081")]
        listen: String,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let command = cli.command.unwrap_or(Command::Serve(cli.serve));
    if let Command::Serve(args) = &command {
        // Before any thread starts: the flags go through the environment.
        switchyard::cli::listen_flags(args.listen.as_deref(), args.admin_listen.as_deref());
    }
    // `serve`: client traffic runs on per-core worker runtimes (see
    // `server`); this runtime only carries the admin listener and signals.
    // `check`, `usage`: a config in etcd is read on it.
    // `mock`: the mock providers use every core.
    let mut builder = match command {
        Command::Mock { .. } => tokio::runtime::Builder::new_multi_thread(),
        _ => tokio::runtime::Builder::new_current_thread(),
    };
    let rt = match builder.enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    rt.block_on(async move {
        match command {
            Command::Serve(args) => switchyard::cli::serve(args.config).await,
            Command::Mock { listen } => switchyard::cli::mock(&listen).await,
            Command::Usage {
                config,
                since,
                until,
                group_by,
                format,
            } => {
                let format = match format.as_str() {
                    "csv" => switchyard::cli::UsageFormat::Csv,
                    "json" => switchyard::cli::UsageFormat::Json,
                    _ => switchyard::cli::UsageFormat::Table,
                };
                switchyard::cli::usage(config, since, until, group_by, format).await
            }
            Command::Check { config } => switchyard::cli::check(&config).await,
        }
    })
}
