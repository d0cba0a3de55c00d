//! Flattens a model part's serde form into `dotted.key → scalar` pairs: the columns of `--csv` and
//! the metrics of `compare`, derived from the Model's JSON keys so new fields appear by themselves.

use serde_json::Value;

/// Appends the scalar leaves of `value` (numbers, strings, booleans; nulls as Null) under `prefix`.
/// Arrays are skipped: the callers flatten list items (devices, processes) one by one.
pub fn flatten(value: &Value, prefix: &str, out: &mut Vec<(String, Value)>) {
    match value {
        Value::Object(map) => {
            for (k, v) in map {
                let key = if prefix.is_empty() { k.clone() } else { format!("{prefix}.{k}") };
                flatten(v, &key, out);
            }
        }
        Value::Array(_) => {}
        scalar => out.push((prefix.to_string(), scalar.clone())),
    }
}

/// The numeric leaves only, as f64.
pub fn numbers(value: &Value, prefix: &str) -> Vec<(String, f64)> {
    let mut all = Vec::new();
    flatten(value, prefix, &mut all);
    all.into_iter().filter_map(|(k, v)| v.as_f64().map(|x| (k, x))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nested_objects_become_dotted_keys_and_arrays_are_skipped() {
        let v = serde_json::json!({"a": 1, "b": {"c": 2.5, "d": null, "e": "x"}, "f": [1, 2]});
        let mut out = Vec::new();
        flatten(&v, "", &mut out);
        let keys: Vec<_> = out.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["a", "b.c", "b.d", "b.e"]);
        assert_eq!(numbers(&v, "m"), vec![("m.a".to_string(), 1.0), ("m.b.c".to_string(), 2.5)]);
    }
}
