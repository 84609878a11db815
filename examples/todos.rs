//! A to-do list on the pool, ported from a `sqlx::PgPool` program: see
//! `pool_examples::todos` for the code, and MIGRATION.md for the lines that
//! changed.
//!
//! ```text
//! cargo run -p pool-examples --features todos --example todos                  # the demo, then cleans up
//! cargo run -p pool-examples --features todos --example todos -- add 'buy milk'
//! cargo run -p pool-examples --features todos --example todos -- done 1
//! cargo run -p pool-examples --features todos --example todos -- list
//! cargo run -p pool-examples --features todos --example todos -- archive
//! cargo run -p pool-examples --features todos --example todos -- drop          # removes the schema
//! ```
//!
//! Reads `DATABASE_URL` (default `postgres://postgres@127.0.0.1:5432/test`)
//! and `TODOS_SCHEMA`, the schema everything lives in (default
//! `pool_core_todos`). Without arguments it runs every step once and drops
//! its schema at the end; with one, it keeps the list between runs until
//! `drop`.

use anyhow::{bail, Context};
use pool_examples::todos;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let url = std::env::var("DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned());
    let schema = std::env::var("TODOS_SCHEMA").unwrap_or_else(|_| "pool_core_todos".to_owned());
    let args: Vec<String> = std::env::args().skip(1).collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();

    if args.is_empty() {
        return todos::demo(&url, &schema, &mut std::io::stdout())
            .await
            .context("the demo failed (is PostgreSQL running?)");
    }
    let pool = todos::connect(&url, &schema)
        .await
        .context("connecting (is PostgreSQL running?)")?;
    match args.as_slice() {
        ["add", description] => println!("added {}", todos::add(&pool, description).await?),
        ["done", id] => {
            let id: i64 = id
                .parse()
                .with_context(|| format!("{id:?} is not a number"))?;
            if todos::complete(&pool, id).await? {
                println!("{id} is done");
            } else {
                println!("no item {id}");
            }
        }
        ["list"] => {
            for todo in todos::list(&pool).await? {
                let mark = if todo.done { "x" } else { " " };
                println!("- [{mark}] {}: {}", todo.id, todo.description);
            }
        }
        ["archive"] => println!("archived {}", todos::archive_done(&pool).await?),
        ["drop"] => {
            todos::drop_schema(&pool, &schema).await?;
            println!("dropped schema {schema}");
        }
        _ => bail!("usage: todos [add DESCRIPTION | done ID | list | archive | drop]"),
    }
    pool.close().await;
    Ok(())
}
