
}{"vote":{"leader_id":{"term":4,"node_id":2},"committed":false},"last_log_id":{"leader_id":{"term":3,"node_id":1},"index":41}}