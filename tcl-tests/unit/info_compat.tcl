# INFO sections tools read (redis-cli --bigkeys, monitoring): memory,
# replication and keyspace as redis-server words them.
start_server {} {
    test "INFO memory, replication and keyspace" {
        r set ic:a 12345
        set info [r info]
        assert_match "*\r\nused_memory:*\r\nused_memory_human:*\r\n*" $info
        assert_match "*\r\nmaxmemory:*\r\nmaxmemory_human:*\r\n*" $info
        assert_match "*# Replication\r\nrole:master\r\nconnected_slaves:0\r\n*" $info
        assert_match "*# Keyspace\r\ndb0:keys=[r dbsize],expires=0,avg_ttl=0\r\n*" $info
        assert_match "# Replication\r\nrole:master*" [r info replication]
    }
}
