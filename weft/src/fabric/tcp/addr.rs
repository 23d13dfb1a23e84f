//! Which local address a rank's TCP listener binds, from `WEFT_TCP_ADDR` / `WEFT_TCP_IF`.
//! Never every interface unless asked (`WEFT_TCP_ADDR=0.0.0.0`).

use crate::sys::net::{interface_addrs, IfAddr};
use std::net::{IpAddr, Ipv4Addr};

/// Where to listen, and the address to publish to peers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Choice {
    /// Address to bind.
    pub bind: IpAddr,
    /// Address peers connect to (differs from `bind` only for the wildcard).
    pub publish: IpAddr,
}

/// Chooses the address. `one_node`: every peer of this rank is on this host, so loopback
/// serves when nothing is named.
pub fn choose(tcp_addr: &str, tcp_if: &str, one_node: bool) -> Result<Choice, String> {
    let ifs = interface_addrs().map_err(|e| format!("cannot list network interfaces: {e}"))?;
    choose_among(&ifs, tcp_addr, tcp_if, one_node)
}

fn same(ip: IpAddr) -> Choice {
    Choice {
        bind: ip,
        publish: ip,
    }
}

/// [`choose`] over a given interface list (testable).
pub fn choose_among(
    ifs: &[IfAddr],
    tcp_addr: &str,
    tcp_if: &str,
    one_node: bool,
) -> Result<Choice, String> {
    let first_external = || {
        ifs.iter()
            .find(|a| a.up && !a.loopback && a.addr.is_ipv4())
            .map(|a| a.addr)
    };
    if !tcp_addr.is_empty() {
        if let Some((net, bits)) = tcp_addr.split_once('/') {
            let net: IpAddr = net
                .parse()
                .map_err(|_| format!("WEFT_TCP_ADDR={tcp_addr:?}: {net:?} is not an address"))?;
            let bits: u8 = bits
                .parse()
                .ok()
                .filter(|&b| b <= if net.is_ipv4() { 32 } else { 128 })
                .ok_or_else(|| format!("WEFT_TCP_ADDR={tcp_addr:?}: bad prefix length"))?;
            return ifs
                .iter()
                .find(|a| a.up && in_subnet(a.addr, net, bits))
                .map(|a| same(a.addr))
                .ok_or_else(|| {
                    format!(
                        "WEFT_TCP_ADDR={tcp_addr:?}: no interface of this host that is up has \
                         an address in that subnet (it has {})",
                        list(ifs)
                    )
                });
        }
        let ip: IpAddr = tcp_addr.parse().map_err(|_| {
            format!("WEFT_TCP_ADDR={tcp_addr:?} is not an address or subnet (e.g. 10.1.2.3, 10.1.0.0/16)")
        })?;
        if ip.is_unspecified() {
            let publish = if one_node {
                IpAddr::V4(Ipv4Addr::LOCALHOST)
            } else {
                first_external().ok_or_else(|| {
                    format!(
                        "WEFT_TCP_ADDR={tcp_addr}: listening everywhere, but no non-loopback \
                         interface is up to publish to other hosts (it has {})",
                        list(ifs)
                    )
                })?
            };
            return Ok(Choice { bind: ip, publish });
        }
        return Ok(same(ip));
    }
    if !tcp_if.is_empty() {
        let on_if: Vec<&IfAddr> = ifs.iter().filter(|a| a.name == tcp_if).collect();
        if on_if.is_empty() {
            return Err(format!(
                "WEFT_TCP_IF={tcp_if:?}: no such interface with an address (this host has {})",
                list(ifs)
            ));
        }
        let a = on_if.iter().find(|a| a.addr.is_ipv4()).unwrap_or(&on_if[0]);
        return Ok(same(a.addr));
    }
    if one_node {
        return Ok(same(IpAddr::V4(Ipv4Addr::LOCALHOST)));
    }
    first_external().map(same).ok_or_else(|| {
        format!(
            "the job spans hosts but no non-loopback IPv4 interface is up here (this host has \
             {}); name one with WEFT_TCP_IF or WEFT_TCP_ADDR",
            list(ifs)
        )
    })
}

fn in_subnet(addr: IpAddr, net: IpAddr, bits: u8) -> bool {
    match (addr, net) {
        (IpAddr::V4(a), IpAddr::V4(n)) => {
            let mask = if bits == 0 {
                0
            } else {
                u32::MAX << (32 - bits)
            };
            u32::from(a) & mask == u32::from(n) & mask
        }
        (IpAddr::V6(a), IpAddr::V6(n)) => {
            let mask = if bits == 0 {
                0
            } else {
                u128::MAX << (128 - bits)
            };
            u128::from(a) & mask == u128::from(n) & mask
        }
        _ => false,
    }
}

fn list(ifs: &[IfAddr]) -> String {
    let v: Vec<String> = ifs
        .iter()
        .map(|a| {
            format!(
                "{} {}/{}{}",
                a.name,
                a.addr,
                a.prefix,
                if a.up { "" } else { " (down)" }
            )
        })
        .collect();
    if v.is_empty() {
        "no addresses".into()
    } else {
        v.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ifs() -> Vec<IfAddr> {
        let a = |name: &str, ip: &str, prefix, up, loopback| IfAddr {
            name: name.into(),
            addr: ip.parse().unwrap(),
            prefix,
            up,
            loopback,
        };
        vec![
            a("lo", "127.0.0.1", 8, true, true),
            a("eth0", "192.168.5.9", 24, false, false),
            a("veth1", "10.77.0.2", 24, true, false),
            a("veth1", "fd00::2", 64, true, false),
        ]
    }

    #[test]
    fn default_is_loopback_on_one_node_else_first_external_up() {
        assert_eq!(
            choose_among(&ifs(), "", "", true).unwrap(),
            same("127.0.0.1".parse().unwrap())
        );
        assert_eq!(
            choose_among(&ifs(), "", "", false).unwrap().bind,
            "10.77.0.2".parse::<IpAddr>().unwrap()
        );
        let only_lo = &ifs()[..1];
        let e = choose_among(only_lo, "", "", false).unwrap_err();
        assert!(
            e.contains("WEFT_TCP_IF") && e.contains("lo 127.0.0.1/8"),
            "{e}"
        );
    }

    #[test]
    fn named_address_subnet_interface_and_wildcard() {
        assert_eq!(
            choose_among(&ifs(), "10.9.9.9", "", false).unwrap().bind,
            "10.9.9.9".parse::<IpAddr>().unwrap()
        );
        assert_eq!(
            choose_among(&ifs(), "10.77.0.0/16", "", false)
                .unwrap()
                .bind,
            "10.77.0.2".parse::<IpAddr>().unwrap()
        );
        let e = choose_among(&ifs(), "192.168.5.0/24", "", false).unwrap_err();
        assert!(e.contains("no interface"), "{e}");
        assert_eq!(
            choose_among(&ifs(), "", "veth1", false).unwrap().bind,
            "10.77.0.2".parse::<IpAddr>().unwrap()
        );
        assert!(choose_among(&ifs(), "", "ib0", false)
            .unwrap_err()
            .contains("ib0"));
        let w = choose_among(&ifs(), "0.0.0.0", "", false).unwrap();
        assert!(w.bind.is_unspecified());
        assert_eq!(w.publish, "10.77.0.2".parse::<IpAddr>().unwrap());
        assert!(choose_among(&ifs(), "banana", "", false).is_err());
        assert!(choose_among(&ifs(), "10.0.0.0/40", "", false).is_err());
    }
}
