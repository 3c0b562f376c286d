use prompt_shield::{features, model, normalize};
fn main() {
    for t in std::env::args().skip(1) {
        let n = normalize::normalize(&t);
        let h = features::hand_features(&n);
        let p = model::parts(&n, &h);
        println!("{:.3} z_hand {:.2} whole {:.2} win {:?} hand {:?} :: {t}", model::score_text(&t).score, p.z_hand, p.whole, p.windows.len(), h);
    }
}
