// scratch: syntax check of a CUDA source through hiprtc (not committed)
fn main() {
    let path = std::env::args().nth(1).unwrap();
    let src = std::fs::read_to_string(&path).unwrap();
    match gpu::hip::compile_for("gfx90a", "chk", &src) {
        Ok(c) => println!("ok, {} bytes", c.len()),
        Err(e) => {
            println!("{e}");
            std::process::exit(1)
        }
    }
}
