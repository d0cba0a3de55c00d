//! The names people know for a cgroup v2 path: the systemd unit, the Docker or Podman container,
//! the Kubernetes pod (uid, QoS class) and container. Pure parsing of the path's common shapes:
//!
//! | path (below the cgroup2 mount) | kind | name |
//! |---|---|---|
//! | `/` | root | `/` |
//! | `/system.slice/nginx.service` | systemd | `nginx.service` |
//! | `/system.slice/docker-<id>.scope`, `/docker/<id>` | docker | `docker <id:12>` |
//! | `/machine.slice/libpod-<id>.scope[/container]` | podman | `podman <id:12>` |
//! | `/kubepods.slice/kubepods-<qos>.slice/kubepods-<qos>-pod<uid>.slice/cri-containerd-<id>.scope` | kubernetes | `pod <uid> ctr <id:12>` |
//! | `/kubepods/<qos>/pod<uid>/<id>` (cgroupfs driver) | kubernetes | the same |
//!
//! Container runtimes' scopes are `cri-containerd-`, `crio-`, `docker-` and `libpod-`; systemd
//! writes the pod uid with `_` for `-`, restored here. Anything else: the last path component.

use serde::Serialize;

/// What a cgroup path says about who runs in it (JSON: `cgroups[].{kind,name,pod_uid,qos,container_id}`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct CgroupName {
    /// "root", "systemd", "docker", "podman", "kubernetes", or "other".
    pub kind: &'static str,
    pub name: String,
    /// Kubernetes: the pod's uid (`metadata.uid`) and QoS class ("guaranteed" when the path has none).
    pub pod_uid: Option<String>,
    pub qos: Option<String>,
    /// The container id (full) for containers.
    pub container_id: Option<String>,
}

/// Short container ids are 12 hex digits (`docker ps`, `crictl ps`).
const SHORT_ID: usize = 12;

pub fn parse(path: &str) -> CgroupName {
    let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
    let Some(&last) = parts.last() else {
        return CgroupName { kind: "root", name: "/".into(), ..Default::default() };
    };
    if let Some(k) = kubernetes(&parts) {
        return k;
    }
    // Docker (systemd or cgroupfs driver) and Podman.
    for (i, p) in parts.iter().enumerate().rev() {
        if let Some(id) = runtime_scope(p, &["docker-"]) {
            return container("docker", id);
        }
        if let Some(id) = runtime_scope(p, &["libpod-"]) {
            return container("podman", id);
        }
        if i > 0 && parts[i - 1] == "docker" && is_hex_id(p) {
            return container("docker", p);
        }
    }
    let kind =
        if [".service", ".scope", ".slice", ".socket", ".mount", ".swap"].iter().any(|s| last.ends_with(s)) {
            "systemd"
        } else {
            "other"
        };
    CgroupName { kind, name: last.to_string(), ..Default::default() }
}

fn container(kind: &'static str, id: &str) -> CgroupName {
    CgroupName {
        kind,
        name: format!("{kind} {}", short(id)),
        container_id: Some(id.to_string()),
        ..Default::default()
    }
}

fn short(id: &str) -> &str {
    &id[..id.len().min(SHORT_ID)]
}

fn is_hex_id(s: &str) -> bool {
    s.len() >= SHORT_ID && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// `<prefix><id>.scope` of a container runtime: the id.
fn runtime_scope<'a>(part: &'a str, prefixes: &[&str]) -> Option<&'a str> {
    let body = part.strip_suffix(".scope")?;
    prefixes.iter().find_map(|p| body.strip_prefix(p)).filter(|id| is_hex_id(id))
}

/// A path inside `kubepods` (systemd driver `kubepods.slice`, cgroupfs driver `kubepods`).
fn kubernetes(parts: &[&str]) -> Option<CgroupName> {
    let start = parts.iter().position(|p| *p == "kubepods.slice" || *p == "kubepods")?;
    let mut qos = None;
    let mut uid = None;
    let mut ctr = None;
    for p in &parts[start + 1..] {
        let slice = p.strip_suffix(".slice");
        if let Some(pod) = slice.and_then(|s| s.rsplit_once("-pod")).map(|(_, u)| u) {
            uid = Some(pod.replace('_', "-"));
        } else if let Some(q) = slice.and_then(|s| s.strip_prefix("kubepods-")) {
            qos = Some(q.to_string());
        } else if let Some(pod) = p.strip_prefix("pod").filter(|_| slice.is_none()) {
            uid = Some(pod.to_string());
        } else if matches!(*p, "burstable" | "besteffort") {
            qos = Some(p.to_string());
        } else if let Some(id) = runtime_scope(p, &["cri-containerd-", "crio-", "docker-", "libpod-"]) {
            ctr = Some(id.to_string());
        } else if is_hex_id(p) {
            ctr = Some(p.to_string());
        }
    }
    let qos = qos.or_else(|| uid.as_ref().map(|_| "guaranteed".to_string()));
    let name = match (&uid, &ctr) {
        (Some(u), Some(c)) => format!("pod {u} ctr {}", short(c)),
        (Some(u), None) => format!("pod {u}"),
        (None, Some(c)) => format!("ctr {}", short(c)),
        (None, None) => match &qos {
            Some(q) => format!("kubepods {q}"),
            None => "kubepods".to_string(),
        },
    };
    Some(CgroupName { kind: "kubernetes", name, pod_uid: uid, qos, container_id: ctr })
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &str = "3f1c2a9b8d7e6f5a4b3c2d1e0f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c4d3e2f1a";

    #[test]
    fn root_and_systemd_units() {
        assert_eq!(parse("/").kind, "root");
        assert_eq!(parse("").name, "/");
        let n = parse("/system.slice/postgresql@15-main.service");
        assert_eq!((n.kind, n.name.as_str()), ("systemd", "postgresql@15-main.service"));
        let n = parse("/user.slice/user-1000.slice/session-3.scope");
        assert_eq!((n.kind, n.name.as_str()), ("systemd", "session-3.scope"));
        assert_eq!(parse("/system.slice").name, "system.slice");
        let n = parse("/ioscope-test/a");
        assert_eq!((n.kind, n.name.as_str()), ("other", "a"));
    }

    #[test]
    fn docker_and_podman_containers() {
        for path in [format!("/system.slice/docker-{ID}.scope"), format!("/docker/{ID}")] {
            let n = parse(&path);
            assert_eq!((n.kind, n.name.as_str()), ("docker", "docker 3f1c2a9b8d7e"), "{path}");
            assert_eq!(n.container_id.as_deref(), Some(ID));
        }
        let n = parse(&format!("/machine.slice/libpod-{ID}.scope/container"));
        assert_eq!((n.kind, n.name.as_str()), ("podman", "podman 3f1c2a9b8d7e"));
        // A unit merely named like a runtime, without an id: a systemd unit.
        assert_eq!(parse("/system.slice/docker.service").kind, "systemd");
    }

    #[test]
    fn kubernetes_systemd_driver() {
        let pod = "kubepods-burstable-pod8c5e3b4a_1f2d_4c6b_9a7e_0d1c2b3a4f5e.slice";
        let n = parse(&format!("/kubepods.slice/kubepods-burstable.slice/{pod}/cri-containerd-{ID}.scope"));
        assert_eq!(n.kind, "kubernetes");
        assert_eq!(n.pod_uid.as_deref(), Some("8c5e3b4a-1f2d-4c6b-9a7e-0d1c2b3a4f5e"));
        assert_eq!(n.qos.as_deref(), Some("burstable"));
        assert_eq!(n.container_id.as_deref(), Some(ID));
        assert_eq!(n.name, "pod 8c5e3b4a-1f2d-4c6b-9a7e-0d1c2b3a4f5e ctr 3f1c2a9b8d7e");
        // Guaranteed pods sit right under kubepods.slice; CRI-O's scopes.
        let n = parse(&format!(
            "/kubepods.slice/kubepods-pod0a1b2c3d_0000_1111_2222_333344445555.slice/crio-{ID}.scope"
        ));
        assert_eq!(n.qos.as_deref(), Some("guaranteed"));
        assert_eq!(n.pod_uid.as_deref(), Some("0a1b2c3d-0000-1111-2222-333344445555"));
        assert_eq!(n.name, "pod 0a1b2c3d-0000-1111-2222-333344445555 ctr 3f1c2a9b8d7e");
        // The pod's own cgroup, and the QoS slice.
        let n = parse("/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-podab_cd.slice");
        assert_eq!((n.name.as_str(), n.container_id), ("pod ab-cd", None));
        assert_eq!(parse("/kubepods.slice/kubepods-besteffort.slice").name, "kubepods besteffort");
    }

    #[test]
    fn kubernetes_cgroupfs_driver() {
        let n = parse(&format!("/kubepods/burstable/pod8c5e3b4a-1f2d-4c6b-9a7e-0d1c2b3a4f5e/{ID}"));
        assert_eq!(n.kind, "kubernetes");
        assert_eq!(n.qos.as_deref(), Some("burstable"));
        assert_eq!(n.pod_uid.as_deref(), Some("8c5e3b4a-1f2d-4c6b-9a7e-0d1c2b3a4f5e"));
        assert_eq!(n.container_id.as_deref(), Some(ID));
        let n = parse(&format!("/kubepods/podabc/{ID}"));
        assert_eq!((n.qos.as_deref(), n.name.as_str()), (Some("guaranteed"), "pod abc ctr 3f1c2a9b8d7e"));
    }
}
