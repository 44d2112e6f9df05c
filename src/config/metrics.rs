//! Parsers of the metrics options: `metrics_listen` (where `/metrics` is
//! served over HTTP) and the on/off of `latency_histograms`.

use super::{ConfigError, err};

/// `metrics_listen`: an `IP:PORT` socket address (`127.0.0.1:9567`,
/// `[::1]:9567`, `0.0.0.0:9567`). Errors: anything else, or port 0.
pub fn parse_listen(v: &str) -> Result<std::net::SocketAddr, ConfigError> {
    match v.trim().parse::<std::net::SocketAddr>() {
        Ok(a) if a.port() != 0 => Ok(a),
        Ok(_) => err(format!("metrics_listen: '{v}' has port 0; give the port to serve on, e.g. 127.0.0.1:9567")),
        Err(_) => err(format!("metrics_listen: '{v}' is not IP:PORT; e.g. metrics_listen=127.0.0.1:9567")),
    }
}

/// An `on`/`off` option named `key`. Errors: anything else.
pub fn parse_on_off(key: &str, v: &str) -> Result<bool, ConfigError> {
    match v.trim() {
        "on" => Ok(true),
        "off" => Ok(false),
        _ => err(format!("{key}: '{v}' is not on or off; e.g. {key}=off")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listen_addresses_and_on_off() {
        assert_eq!(parse_listen("127.0.0.1:9567").unwrap().port(), 9567);
        assert!(parse_listen("[::1]:9567").unwrap().is_ipv6());
        for bad in ["localhost:9567", "127.0.0.1", "127.0.0.1:0", ":9567", "127.0.0.1:99999"] {
            let e = parse_listen(bad).unwrap_err().to_string();
            assert!(e.starts_with("metrics_listen: ") && !e.contains('\n'), "{bad}: {e}");
        }
        assert_eq!((parse_on_off("k", "on").unwrap(), parse_on_off("k", "off").unwrap()), (true, false));
        assert!(parse_on_off("k", "yes").unwrap_err().to_string().contains("k=off"));
    }
}
