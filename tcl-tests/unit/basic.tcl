# Basic commands and their exact replies.
start_server {} {
    test "PING and ECHO" {
        assert_equal {status PONG} [r typed ping]
        assert_equal {bulk hello} [r typed ping hello]
        assert_equal [list bulk "a b"] [r typed echo "a b"]
    }

    test "SET, GET, MGET, STRLEN, EXISTS" {
        assert_equal {status OK} [r typed set basic:a 1]
        assert_equal {bulk 1} [r typed get basic:a]
        assert_equal {nil {}} [r typed get basic:missing]
        assert_equal {array {{bulk 1} {nil {}}}} [r typed mget basic:a basic:missing]
        assert_equal {int 1} [r typed strlen basic:a]
        assert_equal {int 0} [r typed strlen basic:missing]
        assert_equal {int 2} [r typed exists basic:a basic:a basic:missing]
    }

    test "PUT and REMOVE are SET and DEL" {
        assert_equal OK [r put basic:p v]
        assert_equal v [r get basic:p]
        assert_equal 1 [r remove basic:p]
        assert_equal 0 [r remove basic:p]
        assert_equal 0 [r exists basic:p]
    }

    test "UNLINK is DEL" {
        r set basic:u1 x
        r set basic:u2 y
        assert_equal {int 2} [r typed unlink basic:u1 basic:u2 basic:missing]
        assert_equal 0 [r exists basic:u1 basic:u2]
        assert_equal OK [r set basic:u1 other]
    }

    test "DEL counts removed keys, DBSIZE follows" {
        set before [r dbsize]
        r set basic:d1 x
        r set basic:d2 y
        assert_equal [expr {$before + 2}] [r dbsize]
        assert_equal {int 2} [r typed del basic:d1 basic:d2 basic:missing]
        assert_equal $before [r dbsize]
    }

    test "SCAN visits every key" {
        for {set i 0} {$i < 200} {incr i} { r set scan:$i $i }
        set seen {}
        set cursor 0
        set rounds 0
        while 1 {
            lassign [r scan $cursor match scan:* count 17] cursor keys
            foreach k $keys { dict set seen $k 1 }
            if {$cursor eq "0" || [incr rounds] > 10000} break
        }
        assert_equal 200 [dict size $seen]
    }

    test "SELECT 0, wrong DB rejected" {
        assert_equal OK [r select 0]
        assert_error "ERR*" {r select 99}
    }

    test "INFO, CONFIG GET, COMMAND, CLIENT" {
        assert_match "*# Server*" [r info]
        set cfg [r config get *]
        assert {[llength $cfg] % 2 == 0}
        assert {[r command count] > 10}
        assert_equal OK [r client setname tcl-basic]
        assert_equal tcl-basic [r client getname]
        assert_match "*name=tcl-basic*" [r client list]
        assert {[string is integer -strict [r client id]]}
    }

    test "unknown command and wrong arity" {
        assert_error "ERR unknown command*" {r nosuchcommand a}
        assert_error "ERR wrong number of arguments*" {r get}
        assert_equal PONG [r ping]
    }

    test "binary-safe keys and values (CR, LF, NUL, all bytes)" {
        set v "a\r\nb\0c\r\n"
        for {set i 0} {$i < 256} {incr i} { append v [format %c $i] }
        r set "bin\r\nkey\0" $v
        assert_equal $v [r get "bin\r\nkey\0"]
        assert_equal [string length $v] [r strlen "bin\r\nkey\0"]
    }

    test "empty value is an empty bulk, not nil" {
        if {$::tt::server_kind eq "cluster"} { skip "the cluster stores values of at least 1 byte (docs/COMMANDS.md)" }
        assert_equal OK [r set basic:empty ""]
        assert_equal {bulk {}} [r typed get basic:empty]
        assert_equal 0 [r strlen basic:empty]
        assert_equal 1 [r exists basic:empty]
    }

    test "QUIT replies OK and closes" {
        set c [new_client]
        assert_equal OK [$c quit]
        assert_equal 1 [$c wait_closed]
        $c close
        assert_equal PONG [r ping]
    }
}
