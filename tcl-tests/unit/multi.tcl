# MULTI / EXEC / DISCARD: exact replies, in order, as Redis 7 gives them.
start_server {} {
    test "EXEC replies the queued commands' replies as one array, in order" {
        set c [new_client]
        $c send multi
        $c send set tx:a 1
        $c send get tx:a
        $c send exists tx:a tx:none
        $c send get tx:none
        $c send set tx:a 2
        $c send exec
        $c flush
        assert_equal {status OK} [$c read_typed]
        foreach i {1 2 3 4 5} { assert_equal {status QUEUED} [$c read_typed] }
        assert_equal {array {{status OK} {bulk 1} {int 1} {nil {}} {error {EXISTS key already exists}}}} \
            [$c read_typed]
        assert_equal 1 [r get tx:a]
        $c close
    }

    test "nothing runs before EXEC" {
        set c [new_client]
        $c send multi
        $c send set tx:later v
        $c flush
        $c read; $c read
        assert_equal 0 [r exists tx:later]
        $c send exec
        $c flush
        assert_equal {array {{status OK}}} [$c read_typed]
        assert_equal v [r get tx:later]
        $c close
    }

    test "an error while queuing aborts EXEC and stores nothing" {
        set c [new_client]
        $c send multi
        $c send set tx:ab 1
        $c send nosuch x
        $c send get
        $c send exec
        $c flush
        assert_equal {status OK} [$c read_typed]
        assert_equal {status QUEUED} [$c read_typed]
        assert_match {error {ERR unknown command 'nosuch'*}} [$c read_typed]
        assert_equal {error {ERR wrong number of arguments for 'get' command}} [$c read_typed]
        assert_equal {error {EXECABORT Transaction discarded because of previous errors.}} [$c read_typed]
        assert_equal 0 [r exists tx:ab]
        $c close
    }

    test "nested MULTI, EXEC and DISCARD without MULTI" {
        set c [new_client]
        assert_equal {error {ERR EXEC without MULTI}} [$c typed exec]
        assert_equal {error {ERR DISCARD without MULTI}} [$c typed discard]
        assert_equal {status OK} [$c typed multi]
        assert_equal {error {ERR MULTI calls can not be nested}} [$c typed multi]
        assert_equal {status QUEUED} [$c typed ping]
        assert_equal {array {{status PONG}}} [$c typed exec]
        $c close
    }

    test "DISCARD drops the queue" {
        set c [new_client]
        $c typed multi
        $c typed set tx:disc v
        assert_equal {status OK} [$c typed discard]
        assert_equal 0 [r exists tx:disc]
        assert_equal {status PONG} [$c typed ping]
        $c close
    }

    test "WATCH is refused, UNWATCH is OK, empty EXEC is an empty array" {
        assert_error "ERR WATCH is not supported*" {r watch tx:a}
        assert_equal OK [r unwatch]
        set c [new_client]
        $c typed multi
        assert_equal {error {ERR WATCH inside MULTI is not allowed}} [$c typed watch tx:a]
        assert_equal {array {}} [$c typed exec]
        $c close
    }

    test "a large value queued in MULTI is stored whole by EXEC" {
        set v [string repeat "0123456789abcdef" 65536]
        set c [new_client]
        $c typed multi
        $c typed set tx:big $v
        assert_equal {array {{status OK}}} [$c typed exec]
        assert_equal [string length $v] [r strlen tx:big]
        assert_equal $v [r get tx:big]
        $c close
    }
}
