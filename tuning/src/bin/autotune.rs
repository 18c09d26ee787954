fn main() { println!("autotune: not yet"); }
