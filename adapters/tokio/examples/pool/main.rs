//! A small object pool over `tokio::sync::Semaphore` used as a counter, ported to
//! `admit` by its `use` line: `pool.rs` is written once against tokio's API and
//! included twice, once under each `use`, and its tests run against both.
//!
//! ```sh
//! cargo run -p admit-tokio --example pool
//! cargo test -p admit-tokio --example pool   # also run by `cargo test --workspace`
//! ```
//!
//! docs/from-tokio.md walks through the port.

mod on_tokio {
    use tokio::sync::Semaphore;
    include!("pool.rs");
}

mod on_admit {
    use admit::compat::Semaphore;
    include!("pool.rs");
}

/// Four workers share two connections, made after the workers have started
/// waiting: each worker checks one out, uses it, and returns it. Then the pool
/// closes.
macro_rules! demo {
    ($on:ident) => {
        async {
            let pool = std::sync::Arc::new($on::Pool::<String>::new());
            let workers: Vec<_> = (1..=4)
                .map(|worker| {
                    let pool = std::sync::Arc::clone(&pool);
                    tokio::spawn(async move {
                        let mut connection = pool.get().await.unwrap();
                        connection.push_str(&format!(" worker {worker},"));
                        tokio::task::yield_now().await; // the query
                    })
                })
                .collect();
            tokio::task::yield_now().await; // every worker waits on the empty pool
            println!("  4 workers wait, {} connections idle", pool.idle());
            for id in ["a", "b"] {
                pool.add(format!("connection {id} served"));
            }
            for worker in workers {
                worker.await.unwrap();
            }
            while let Some(connection) = pool.try_get() {
                println!("  {}", $on::Object::take(connection).trim_end_matches(','));
            }
            pool.close();
            println!("  closed: a checkout gets {:?}", pool.get().await.err());
        }
    };
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    println!("on tokio::sync::Semaphore:");
    demo!(on_tokio).await;
    println!("on admit::compat::Semaphore:");
    demo!(on_admit).await;
}
