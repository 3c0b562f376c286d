//! `include_dir!` does not tell cargo which files it read: a change to the
//! embedded templates, guest libraries or SDK must rebuild the binary.
fn main() {
    for dir in ["../../sdk", "../../plugins/sdk/src", "../../wit"] {
        println!("cargo:rerun-if-changed={dir}");
    }
}
