# Inline commands, as typed in telnet.
start_server {} {
    test "inline PING, SET and GET with quotes" {
        set c [new_client]
        $c write "PING\r\n"
        assert_equal PONG [$c read]
        $c write "SET inl:k \"hello world\"\r\n"
        assert_equal OK [$c read]
        $c write "GET inl:k\n"
        assert_equal "hello world" [$c read]
        $c write "SET inl:q 'single \"q\"'\r\nGET inl:q\r\n"
        assert_equal OK [$c read]
        assert_equal {single "q"} [$c read]
        $c write "SET inl:x \"\\x41\\r\\n\"\r\nGET inl:x\r\n"
        assert_equal OK [$c read]
        assert_equal "A\r\n" [$c read]
        $c close
    }

    test "empty inline lines are ignored" {
        set c [new_client]
        $c write "\r\n\r\nPING\r\n"
        assert_equal PONG [$c read]
        $c close
    }

    test "unbalanced quotes: protocol error, connection closed" {
        set c [new_client]
        $c write "SET inl:u \"oops\r\n"
        assert_error "ERR Protocol error: unbalanced quotes in request" {$c read}
        assert_equal 1 [$c wait_closed]
        $c close
        assert_equal PONG [r ping]
    }

    test "too big inline request" {
        set c [new_client]
        catch {$c write [string repeat a [expr {1024 * 1024}]]}
        assert_error "ERR Protocol error: too big inline request" {$c read}
        assert_equal 1 [$c wait_closed]
        $c close
        assert_equal PONG [r ping]
    }
}
