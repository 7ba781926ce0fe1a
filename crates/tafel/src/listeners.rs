//! Where a running server listens, for the people and probes that need to
//! find it: the admin listener's binding (its default port taken by another
//! Tafel on the same host is no reason not to start, as two Azurites on two
//! table ports both start), and the listeners file that `tafel health` reads,
//! so the container's HEALTHCHECK follows `--admin-port`, `--no-admin` and a
//! fallback port without being told.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use tokio::net::TcpListener;

/// The admin port when none is given.
pub(crate) const DEFAULT_ADMIN_PORT: u16 = 10012;

/// Binds the admin listener on `host:port`. When the port was not asked for
/// (`given` false: the default) and it is taken, a free port on the same
/// address is taken instead; a port asked for that is taken fails, saying so.
pub(crate) async fn bind_admin(host: &str, port: u16, given: bool, token: Option<&str>) -> anyhow::Result<TcpListener> {
    let addr: SocketAddr = format!("{host}:{port}")
        .parse()
        .context("bad --admin-host/--admin-port")?;
    tafel_admin::check_exposure(&addr, token).map_err(anyhow::Error::msg)?;
    match TcpListener::bind(addr).await {
        Ok(l) => Ok(l),
        Err(e) if !given && e.kind() == std::io::ErrorKind::AddrInUse => {
            let free = SocketAddr::new(addr.ip(), 0);
            let l = TcpListener::bind(free)
                .await
                .with_context(|| format!("binding the admin listener on a free port of {}", addr.ip()))?;
            tracing::warn!(
                "the admin port {port} is taken (another Tafel on this host?): the admin listener takes {} instead \
                 (--admin-port chooses one, --no-admin runs none)",
                l.local_addr()?
            );
            Ok(l)
        }
        Err(e) => Err(e).with_context(|| {
            format!(
                "binding the admin listener {addr} (--admin-port/TAFEL_ADMIN_PORT; left unset, a taken {DEFAULT_ADMIN_PORT} \
                 falls back to a free port; --no-admin runs none)"
            )
        }),
    }
}

/// What the listeners file says.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Listeners {
    /// The Table API's address, as bound.
    pub(crate) table: SocketAddr,
    /// The admin listener's address, or none (`--no-admin`).
    pub(crate) admin: Option<SocketAddr>,
}

impl Listeners {
    fn render(&self) -> String {
        let admin = self.admin.map_or("off".to_owned(), |a| a.to_string());
        format!("table={}\nadmin={admin}\n", self.table)
    }

    fn parse(text: &str) -> anyhow::Result<Listeners> {
        let (mut table, mut admin) = (None, None);
        for line in text.lines() {
            match line.split_once('=') {
                Some(("table", v)) => table = Some(v.parse().with_context(|| format!("bad table address {v}"))?),
                Some(("admin", "off")) => admin = Some(None),
                Some(("admin", v)) => admin = Some(Some(v.parse().with_context(|| format!("bad admin address {v}"))?)),
                _ => {}
            }
        }
        match (table, admin) {
            (Some(table), Some(admin)) => Ok(Listeners { table, admin }),
            _ => anyhow::bail!("it names no table and admin address"),
        }
    }

    /// Reads the file a server wrote.
    pub(crate) fn read(path: &Path) -> anyhow::Result<Listeners> {
        let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        Listeners::parse(&text).with_context(|| format!("{}", path.display()))
    }
}

/// The listeners file while the server runs: written whole (a reader never
/// sees half of it), removed when dropped at exit.
pub(crate) struct ListenersFile(PathBuf);

impl ListenersFile {
    /// Writes it. A file that cannot be written (a read-only root file system)
    /// only costs `tafel health` its way to the server: a warning, not a stop.
    pub(crate) fn write(path: &Path, listeners: &Listeners) -> Option<ListenersFile> {
        let tmp = path.with_extension("tmp");
        let written = std::fs::write(&tmp, listeners.render()).and_then(|()| std::fs::rename(&tmp, path));
        match written {
            Ok(()) => Some(ListenersFile(path.to_owned())),
            Err(e) => {
                tracing::warn!(error = %e, "cannot write the listeners file {}: `tafel health` will not find this server by it", path.display());
                None
            }
        }
    }
}

impl Drop for ListenersFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// A listener's address as a client on this host reaches it: one bound to
/// every address is reached on loopback.
pub(crate) fn reachable(at: SocketAddr) -> SocketAddr {
    match at.ip() {
        std::net::IpAddr::V4(ip) if ip.is_unspecified() => SocketAddr::from(([127, 0, 0, 1], at.port())),
        std::net::IpAddr::V6(ip) if ip.is_unspecified() => SocketAddr::from((std::net::Ipv6Addr::LOCALHOST, at.port())),
        _ => at,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_file_reads_back_what_was_written() {
        for admin in [
            None,
            Some("127.0.0.1:10012".parse().unwrap()),
            Some("[::1]:4".parse().unwrap()),
        ] {
            let l = Listeners {
                table: "0.0.0.0:10002".parse().unwrap(),
                admin,
            };
            assert_eq!(Listeners::parse(&l.render()).unwrap(), l);
        }
        assert!(Listeners::parse("table=0.0.0.0:1\n").is_err());
    }

    #[tokio::test]
    async fn a_taken_default_admin_port_falls_back_and_a_given_one_fails() {
        let taken = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = taken.local_addr().unwrap().port();
        let other = bind_admin("127.0.0.1", port, false, None).await.unwrap();
        assert_ne!(other.local_addr().unwrap().port(), port);
        let e = bind_admin("127.0.0.1", port, true, None).await.unwrap_err();
        assert!(format!("{e:#}").contains("Address already in use"), "{e:#}");
    }
}
