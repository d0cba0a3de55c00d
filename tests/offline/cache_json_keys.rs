//! The page-cache JSON keys are a documented interface: every key the Model serializes under
//! `cache` and `cache_processes[]` must be named in src/model/README.md's "Page cache" JSON table, and the
//! keys the issue promised must be there.

use crate::busy_box;
use crate::cache_box;

use serde_json::Value;

fn readme_section() -> String {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/src/model/README.md")).unwrap();
    let start = readme.find("\n## Page cache\n").expect("src/model/README.md has a Page cache section");
    let rest = &readme[start..];
    let end = rest[1..].find("\n## ").map_or(rest.len(), |i| i + 1);
    rest[..end].to_string()
}

fn keys(v: &Value) -> Vec<String> {
    v.as_object().unwrap().keys().cloned().collect()
}

#[test]
fn every_cache_key_is_documented_and_the_promised_ones_exist() {
    let json = serde_json::to_value(cache_box::with_cache()).unwrap();
    let doc = readme_section();
    let cache = keys(&json["cache"]);
    let procs = keys(&json["cache_processes"][0]);
    for k in &cache {
        assert!(doc.contains(k.as_str()), "cache.{k} is not documented in src/model/README.md");
    }
    for k in &procs {
        assert!(doc.contains(k.as_str()), "cache_processes[].{k} is not documented in src/model/README.md");
    }
    for k in ["accesses", "misses", "hit_pct", "dirtied", "evicted"] {
        assert!(cache.contains(&k.to_string()), "cache.{k} missing");
    }
    for k in ["pid", "comm", "accesses", "misses", "hit_pct", "dirtied", "throttled_ms"] {
        assert!(procs.contains(&k.to_string()), "cache_processes[].{k} missing");
    }
    // Nested objects' keys too.
    for obj in ["kernel_dirty", "last_throttle", "cross_check"] {
        for k in keys(&json["cache"][obj]) {
            assert!(doc.contains(k.as_str()), "cache.{obj}.{k} is not documented");
        }
    }
}

#[test]
fn without_the_probes_cache_is_null_and_the_list_empty() {
    let json = serde_json::to_value(busy_box::no_psi_no_bpf()).unwrap();
    assert!(json["cache"].is_null());
    assert_eq!(json["cache_processes"], Value::Array(Vec::new()));
}
