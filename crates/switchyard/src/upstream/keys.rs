//! A provider's key pool: weighted choice, so keys can be rotated gradually.

use rand::Rng;

use crate::config::ProviderKey;

/// Pick among usable keys by weight.
pub fn pick_from<'k>(keys: &[&'k ProviderKey]) -> Option<&'k ProviderKey> {
    let total: u64 = keys.iter().map(|k| u64::from(k.weight)).sum();
    if total == 0 {
        return keys.first().copied();
    }
    let mut roll = rand::rng().random_range(0..total);
    for k in keys {
        let w = u64::from(k.weight);
        if roll < w {
            return Some(k);
        }
        roll -= w;
    }
    keys.last().copied()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::secret::Secret;

    fn key(label: &str, weight: u32) -> ProviderKey {
        ProviderKey {
            label: label.into(),
            secret: Secret::new(label.into()),
            weight,
        }
    }

    #[test]
    fn weights_steer_the_choice() {
        let (a, b) = (key("a", 0), key("b", 1));
        for _ in 0..50 {
            assert_eq!(pick_from(&[&a, &b]).map(|k| k.label.as_str()), Some("b"));
        }
        assert!(pick_from(&[]).is_none());
    }
}
