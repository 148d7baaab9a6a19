//! The dashboard's HTML: escaping, the page frame (readable on a phone), and the small script
//! that keeps the board live over the event stream. Rendered by the server; nothing to build.

/// `text` safe inside HTML text and double-quoted attributes.
pub fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// Cents as dollars: `$12.05`.
pub fn dollars(cents: u64) -> String {
    format!("${}.{:02}", cents / 100, cents % 100)
}

const STYLE: &str = "body{font:15px/1.4 system-ui,sans-serif;margin:0;color:#1d2330;background:#f5f6f8}\
header{display:flex;gap:1em;align-items:center;padding:.6em 1em;background:#1d2330;color:#fff;flex-wrap:wrap}\
header a{color:#fff;text-decoration:none}main{padding:1em}\
.board{display:flex;gap:.8em;overflow-x:auto;align-items:flex-start}\
.column{background:#e8eaee;border-radius:6px;padding:.5em;min-width:14em;flex:1}\
.column h2{font-size:.9em;text-transform:uppercase;margin:.2em 0 .5em}\
.card{display:block;background:#fff;border-radius:5px;padding:.5em;margin-bottom:.5em;color:inherit;text-decoration:none;box-shadow:0 1px 2px #0002}\
.muted{color:#667}form.inline{display:inline}input,select,button,textarea{font:inherit;padding:.3em}\
table{border-collapse:collapse;width:100%}td,th{text-align:left;padding:.3em;border-bottom:1px solid #ddd}\
.error{background:#fde8e8;color:#8a1c1c;padding:.5em;border-radius:5px}\
@media(max-width:640px){.board{flex-direction:column}.column{min-width:auto;width:100%}}";

/// A whole page: `title`, the navigation for `company` (when known), and `body`.
pub fn page(title: &str, company: Option<&str>, body: &str) -> String {
    let nav = match company {
        Some(c) => {
            let c = esc(c);
            format!(
                "<a href=\"/board?company={c}\">Board</a><a href=\"/agents?company={c}\">Agents</a>\
                 <a href=\"/budgets?company={c}\">Budgets</a><a href=\"/workers?company={c}\">Workers</a>\
                 <a href=\"/cluster?company={c}\">Cluster</a>"
            )
        }
        None => String::new(),
    };
    format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">\
         <title>{} · Roost</title><style>{STYLE}</style></head><body>\
         <header><strong>Roost</strong>{nav}<span style=\"flex:1\"></span>\
         <form class=\"inline\" method=\"post\" action=\"/logout\"><button>Log out</button></form>\
         </header><main>{body}</main></body></html>",
        esc(title)
    )
}

/// Keeps `#board` current: on each event of the company's stream (`/ui/events`, resumed by the
/// browser from the last event id), the columns are fetched again and swapped in place; the
/// page itself is not reloaded.
pub fn live_board_script(company: &str, fragment_url: &str, after: u64) -> String {
    format!(
        "<script>(function(){{var pending=false;\
         function refresh(){{if(pending)return;pending=true;setTimeout(function(){{\
         fetch({frag},{{credentials:'same-origin'}}).then(function(r){{return r.text()}})\
         .then(function(h){{document.getElementById('board').innerHTML=h;pending=false}},\
         function(){{pending=false}})}},150)}}\
         var es=new EventSource('/ui/events?company='+encodeURIComponent({company})+'&after={after}');\
         es.onmessage=function(){{refresh()}};}})();</script>",
        frag = js_string(fragment_url),
        company = js_string(company),
    )
}

/// `text` as a JavaScript string literal that cannot end the `<script>` it sits in.
fn js_string(text: &str) -> String {
    serde_json::Value::String(text.to_string())
        .to_string()
        .replace('<', "\\u003c")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_script_string_cannot_close_its_script() {
        assert_eq!(js_string("a</script>"), "\"a\\u003c/script>\"");
    }

    #[test]
    fn markup_in_text_is_escaped() {
        assert_eq!(
            esc("<script>alert('x') & \"y\"</script>"),
            "&lt;script&gt;alert(&#39;x&#39;) &amp; &quot;y&quot;&lt;/script&gt;"
        );
    }
}
